"""What a checkpoint of a training plan weighs and how long writing and loading it takes.

A checkpoint holds the model state the memory model counts per parameter: bf16 weights
(WEIGHT_BYTES) and the fp32 master weights and Adam moments (OPTIMIZER_BYTES), for every
parameter. With a sharded optimizer (ZeRO >= 1) every rank writes its 1/(dp*cp) share of its
model-parallel shard, so all GPUs write; without, one data-parallel replica writes (tp*pp GPUs,
placed tp-first on ceil(tp*pp / gpus_per_server) servers). On a restart every GPU loads what it
holds: its shard of the optimizer state with ZeRO, its model-parallel shard's whole state without.

Write time on a storage tier = max(bytes per writing server / per-server bandwidth, total bytes /
the tier's aggregate bandwidth, and, where the tier keeps a peer copy, bytes per server / the
server's scale-out NIC bandwidth). Modes:
- sync: training stops for the whole write;
- async: training stops for the device-to-host copy only (each GPU's share over PCIe), the write
  to storage runs behind it and must end before the next checkpoint starts;
- in_memory: as async, the background copy going to a peer server's host memory over the
  scale-out network (Gemini, Wang et al. SOSP 2023) instead of to storage; a restart loads from
  that peer over the same network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from simulators.models import ModelSpec
from simulators.reliability._catalog import StorageTier, storage_catalog
from simulators.workload import ParallelPlan
from simulators.workload._memory import OPTIMIZER_BYTES, WEIGHT_BYTES

CheckpointMode = Literal["sync", "async", "in_memory"]
CHECKPOINT_MODES: tuple[CheckpointMode, ...] = ("sync", "async", "in_memory")
BYTES_PER_PARAM = WEIGHT_BYTES + OPTIMIZER_BYTES
GBYTE = 1e9


@dataclass(frozen=True)
class CheckpointSize:
    total_bytes: float
    writer_gpus: int
    writer_servers: int
    load_bytes_per_gpu: float  # what each GPU reads back on a restart

    @property
    def write_bytes_per_gpu(self) -> float:
        return self.total_bytes / self.writer_gpus

    @property
    def write_bytes_per_server(self) -> float:
        return self.total_bytes / self.writer_servers


def checkpoint_size(model: ModelSpec, plan: ParallelPlan, gpus_per_server: int) -> CheckpointSize:
    total = float(model.total_params) * BYTES_PER_PARAM
    gpus = plan.tp * plan.pp * plan.cp * plan.dp
    writers = gpus if plan.zero_stage >= 1 else plan.tp * plan.pp
    shard = total / (plan.tp * plan.pp)
    load = shard / (plan.dp * plan.cp) if plan.zero_stage >= 1 else shard
    return CheckpointSize(total, writers, -(-writers // gpus_per_server), load)


@dataclass(frozen=True)
class CheckpointCost:
    """Seconds one checkpoint stops training (`blocking_s`), seconds its write runs on behind
    training (`background_s`), and seconds a restart takes to load it (`load_s`)."""

    blocking_s: float
    background_s: float
    load_s: float


def _tier_time(per_server: float, total: float, per_server_gbps: float, aggregate_gbps: float | None) -> float:
    shared = 0.0 if aggregate_gbps is None else total / (aggregate_gbps * GBYTE)
    return max(per_server / (per_server_gbps * GBYTE), shared)


def checkpoint_cost(
    size: CheckpointSize,
    mode: CheckpointMode,
    tier: StorageTier,
    num_gpus: int,
    gpus_per_server: int,
    nic_gbytes_per_s_per_server: float,
    device_to_host_gbytes_per_s: float | None = None,
) -> CheckpointCost:
    """Times of one checkpoint of `size` on `tier` (storage.yaml) in `mode`;
    `nic_gbytes_per_s_per_server`: the server's scale-out bandwidth, one direction;
    `device_to_host_gbytes_per_s`: per GPU (default storage.yaml's figure)."""
    d2h = device_to_host_gbytes_per_s or storage_catalog().device_to_host_gbytes_per_s_per_gpu.value
    per_server_load = size.load_bytes_per_gpu * min(gpus_per_server, num_gpus)
    to_peer = size.write_bytes_per_server / (nic_gbytes_per_s_per_server * GBYTE)
    from_peer = per_server_load / (nic_gbytes_per_s_per_server * GBYTE)
    if mode == "in_memory":
        return CheckpointCost(size.write_bytes_per_gpu / (d2h * GBYTE), to_peer, from_peer)
    write = _tier_time(
        size.write_bytes_per_server,
        size.total_bytes,
        tier.per_server_write_gbytes_per_s,
        tier.aggregate_write_gbytes_per_s,
    )
    load = _tier_time(
        per_server_load,
        size.load_bytes_per_gpu * num_gpus,
        tier.per_server_read_gbytes_per_s,
        tier.aggregate_read_gbytes_per_s,
    )
    if tier.replicates_to_peer:
        write, load = max(write, to_peer), max(load, from_peer)
    if mode == "sync":
        return CheckpointCost(write, 0.0, load)
    return CheckpointCost(size.write_bytes_per_gpu / (d2h * GBYTE), write, load)
