"""What offloading to the host memory tier costs a training step (closed forms the tests check).

Activation offload (Megatron-Core / Transformer Engine CPU offloading) copies a layer's saved
activations to the host on a side stream while the next layer's forward runs, and reloads them
while the following layer's backward runs (Transformer Engine docs, cpu_offloading: transfers are
asynchronous and overlap compute layer by layer). So each offloaded layer's copy is exposed only
where it outlasts the one layer of compute it hides under:
    exposed = max(0, bytes / link - layer_compute_s)      per layer, per direction.

Optimizer offload (Megatron-Core's HybridDeviceOptimizer, --optimizer-cpu-offload; DeepSpeed
ZeRO-Offload, Ren et al. 2021, arXiv:2101.06840) copies the gradient shard to the host, runs Adam
on the CPU and copies the updated bf16 weights back. CPU Adam is bound by host DRAM bandwidth: it
streams ADAM_BYTES_PER_PARAM per parameter, like the GPU step does through HBM. With the copies
chunked under the CPU step (Megatron's --overlap-cpu-optimizer-d2h-h2d; ZeRO-Offload's pipelined
swap) the three stages overlap and the slowest sets the time, else they run one after another:
    overlapped: max(d2h, cpu, h2d)      serial: d2h + cpu + h2d
(chunks many enough that pipeline fill is negligible; ZeRO-Offload's one-step delayed update,
which hides the CPU step under the next step, is not modelled: it changes the training maths).
NVMe optimizer offload (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857) keeps the
optimizer state on the host's NVMe drives: the CPU step also reads and writes those 12 bytes per
parameter at the GPU's share of the drives' bandwidth, a fourth stage overlapped like the others
(DeepSpeed's pipelined NVMe reads and writes) or in turn:
    overlapped: max(d2h, cpu, nvme, h2d)      serial: d2h + cpu + nvme + h2d,  nvme = 24 B / param

Weight offload (ZeRO-Infinity's offload_param under ZeRO-3) keeps each rank's bf16 parameter
shard on the host: every micro-batch's forward and backward copy each layer's shard to the GPU
before its all-gather, prefetched under the previous layer's compute (DeepSpeed's prefetch), so
each copy is exposed as max(0, shard / link - layer_compute_s) as above; the CPU optimizer then
writes the updated weights into the host shard and copies nothing back (h2d = 0).

Copies are priced at the link's line rate and the HBM traffic of the copies is not charged: both
make these times lower bounds.
"""

from __future__ import annotations

from simulators.hardware import transfer_s
from simulators.workload._memory import ADAM_BYTES_PER_PARAM, OPTIMIZER_BYTES, WEIGHT_BYTES


def exposed_offload_s(nbytes: float, compute_s: float, link_gbytes_per_s: float) -> float:
    """One layer's copy over the host link left on the critical path by `compute_s` of the
    layer it runs under."""
    return max(0.0, transfer_s(nbytes, link_gbytes_per_s) - compute_s)


def cpu_optimizer_step_s(
    local_params: float,
    gradient_bytes: int,
    link_gbytes_per_s: float,
    host_gbytes_per_s: float,
    overlapped: bool,
    weights_on_host: bool = False,
    nvme_gbytes_per_s: float | None = None,
) -> float:
    """Seconds of an offloaded Adam step over `local_params` (the rank's shard): gradients out,
    Adam on the CPU at the GPU's share of host DRAM bandwidth, bf16 weights back (none where the
    weights live on the host)."""
    d2h = transfer_s(local_params * gradient_bytes, link_gbytes_per_s)
    cpu = transfer_s(local_params * ADAM_BYTES_PER_PARAM, host_gbytes_per_s)
    h2d = 0.0 if weights_on_host else transfer_s(local_params * WEIGHT_BYTES, link_gbytes_per_s)
    nvme = 0.0 if nvme_gbytes_per_s is None else transfer_s(local_params * 2 * OPTIMIZER_BYTES, nvme_gbytes_per_s)
    return max(d2h, cpu, nvme, h2d) if overlapped else d2h + cpu + nvme + h2d
