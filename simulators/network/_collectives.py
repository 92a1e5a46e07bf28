"""Alpha-beta costs of ring collectives (Thakur, Rabenseifner & Gropp, IJHPCA 2005).

Constants come from ../shared/reference/netsim.md: NCCL's tuning model (`src/graph/tuning.cc`,
Simple protocol: 8.4 us base latency per collective, 3.4 us per ring step over NVLink, 14 us
per step over the network) and SimAI's effective bus bandwidths (`calbusbw.cc`: H100 NVLink
20.6 of 25 GB/s per link = 0.824; ConnectX-7 NIC 48.5 of 50 GB/s = 0.97).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators.hardware import GpuSpec

BASE_LATENCY_S = 8.4e-6
SCALEUP_STEP_LATENCY_S = 3.4e-6
NIC_STEP_LATENCY_S = 14e-6
SCALEUP_BUS_EFFICIENCY = 0.824
NIC_BUS_EFFICIENCY = 0.97


@dataclass(frozen=True)
class Link:
    """The bottleneck every step of a ring crosses: effective one-way bandwidth and latency."""

    gbytes_per_s: float
    step_latency_s: float

    def transfer_s(self, nbytes: float) -> float:
        return nbytes / (self.gbytes_per_s * 1e9)


def group_link(gpu: GpuSpec, span_gpus: int) -> Link:
    """The link a group uses when its ranks spread over `span_gpus` consecutive GPUs.

    Ranks are placed innermost-first (tp, then dp, then pp, as Megatron orders them), so a
    group of size n and stride k spans n*k GPUs; beyond one scale-up domain it crosses NICs.
    """
    if span_gpus <= gpu.scaleup_domain_gpus:
        return Link(gpu.scaleup_gbytes_per_s * SCALEUP_BUS_EFFICIENCY, SCALEUP_STEP_LATENCY_S)
    return Link(gpu.nic_gbytes_per_s * NIC_BUS_EFFICIENCY, NIC_STEP_LATENCY_S)


def ring_all_reduce_s(nbytes: float, ranks: int, link: Link) -> float:
    """Ring all-reduce of `nbytes` per rank: 2(n-1) steps each moving nbytes/n."""
    if ranks == 1:
        return 0.0
    steps = 2 * (ranks - 1)
    return BASE_LATENCY_S + steps * link.step_latency_s + link.transfer_s(steps / ranks * nbytes)


def ring_reduce_scatter_s(nbytes: float, ranks: int, link: Link) -> float:
    """Ring reduce-scatter of an `nbytes` buffer per rank: (n-1) steps each moving nbytes/n."""
    if ranks == 1:
        return 0.0
    steps = ranks - 1
    return BASE_LATENCY_S + steps * link.step_latency_s + link.transfer_s(steps / ranks * nbytes)


ring_all_gather_s = ring_reduce_scatter_s  # same traffic pattern; `nbytes` = gathered buffer


def send_recv_s(nbytes: float, link: Link) -> float:
    """One point-to-point transfer of `nbytes`."""
    return BASE_LATENCY_S + link.step_latency_s + link.transfer_s(nbytes)
