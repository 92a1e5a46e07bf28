"""The MoE dispatcher's host sync against an event-by-event host/GPU timeline: after the sync the
host issues one kernel per `host_s`, and the GPU runs each once issued and once the previous
one is done."""

import pytest

from simulators.analytical._layer import Block
from simulators.analytical._layer_costs import _moe_sync_host_s

NO_COMM = {"tp": 0.0, "cp": 0.0, "ep": 0.0, "dp": 0.0}


def timeline_s(n: int, kernel_s: float, host_s: float) -> float:
    """Seconds from the sync to the end of n kernels of kernel_s each, stepping event by event."""
    issued = gpu_free = 0.0
    for _ in range(n):
        issued += host_s
        gpu_free = max(issued, gpu_free) + kernel_s
    return gpu_free


def blocks(expert_n: int, expert_s: float) -> tuple[Block, Block]:
    # A GPU-bound attention half (one long kernel) so the expert half alone is exposed.
    attention = Block("attention", 1.0, 0.0, 0.0, 0.0, 0.0, kernels_fwd=1)
    moe = Block("moe", expert_s, 0.0, 0.0, 0.0, 0.0, kernels_fwd=expert_n)
    return attention, moe


@pytest.mark.parametrize(
    "n, kernel_s, host_s",
    [(40, 20e-6, 60e-6), (40, 200e-6, 60e-6), (7, 60e-6, 60e-6), (1, 5e-6, 90e-6), (128, 1e-6, 50e-6)],
)
def test_the_expert_half_after_the_sync_takes_what_the_timeline_takes(n, kernel_s, host_s):
    exposed, rerun = _moe_sync_host_s(blocks(n, n * kernel_s), [], NO_COMM, host_s)
    assert n * kernel_s + exposed == pytest.approx(timeline_s(n, kernel_s, host_s))
    assert rerun == host_s


def test_a_gpu_bound_half_still_waits_for_its_first_launch():
    exposed, _ = _moe_sync_host_s(blocks(3, 3e-3), [], NO_COMM, 80e-6)
    assert exposed == pytest.approx(80e-6)


def test_a_host_bound_attention_half_is_not_hidden_under_the_experts():
    attention = Block("attention", 100e-6, 0.0, 0.0, 0.0, 0.0, kernels_fwd=10)  # host: 10 x 50 us
    moe = Block("moe", 10e-3, 0.0, 0.0, 0.0, 0.0, kernels_fwd=2)
    exposed, _ = _moe_sync_host_s((attention, moe), [], NO_COMM, 50e-6)
    # 500 us of launches for 100 us of work before the sync, then the first launch after it
    assert exposed == pytest.approx(400e-6 + 50e-6)
