"""Routed experts' GEMMs issued as Transformer Engine's multi-stream GroupedLinear (4 streams) or
as one fused grouped kernel, against wave counts and batched-GEMM times computed here."""

import math

import pytest

from simulators import DseError
from simulators.hardware import TE_COMPUTE_STREAMS, gemm_time_s, get_gpu, grouped_gemm_time_s

H100 = get_gpu("H100-SXM")


def test_te_runs_four_compute_streams():
    # transformer_engine/common/util/multi_stream.cpp: get_num_compute_streams() returns 4
    assert TE_COMPUTE_STREAMS == 4


@pytest.mark.parametrize("groups", [1, 2, 3, 4])
def test_up_to_four_experts_run_side_by_side_as_one_batch(groups):
    multi = grouped_gemm_time_s(H100, 512, 1536, 2048, groups, "bf16", "multi_stream")
    assert multi == pytest.approx(gemm_time_s(H100, 512, 1536, 2048, groups, "bf16"))


def test_many_experts_run_in_rounds_of_four_plus_the_rest():
    one_round = gemm_time_s(H100, 256, 1536, 2048, 4, "bf16")
    rest = gemm_time_s(H100, 256, 1536, 2048, 2, "bf16")
    assert grouped_gemm_time_s(H100, 256, 1536, 2048, 30, "bf16", "multi_stream") == pytest.approx(7 * one_round + rest)


def test_tiny_experts_leave_most_sms_idle_unless_fused():
    """128 experts of one 128x128 tile each: a fused kernel runs them all in ceil(128 / SMs) = 1
    wave; four streams take 128 / 4 = 32 rounds of 4 tiles, each a batched GEMM of 4. Splitting K
    over the idle SMs (as cuBLAS does for skinny shapes, and the GEMM model with it) makes a round
    faster than the fused wave, but at most SMs / 4 times faster (each tile's K split over its
    share of the SMs); so the streams cost between 1 and 32 fused waves, here well above one."""
    fused = grouped_gemm_time_s(H100, 128, 128, 4096, 128, "bf16", "fused")
    multi = grouped_gemm_time_s(H100, 128, 128, 4096, 128, "bf16", "multi_stream")
    rounds = 128 // TE_COMPUTE_STREAMS
    assert math.ceil(128 / H100.sm_count) == 1
    round_s = gemm_time_s(H100, 128, 128, 4096, TE_COMPUTE_STREAMS, "bf16")
    assert multi == pytest.approx(rounds * round_s)
    assert fused / (H100.sm_count // TE_COMPUTE_STREAMS) < round_s < fused
    # (so multi < rounds x fused follows from the two lines above) and here well above one wave:
    assert multi > 1.2 * fused


def test_experts_that_fill_the_gpu_cost_the_same_either_way():
    """8 experts of 8192 tokens each fill every SM many times over: issuing them four at a time
    only adds the partial last wave of each round (a few per cent)."""
    fused = grouped_gemm_time_s(H100, 8192, 4096, 4096, 8, "bf16", "fused")
    multi = grouped_gemm_time_s(H100, 8192, 4096, 4096, 8, "bf16", "multi_stream")
    assert fused <= multi <= 1.05 * fused


def test_unknown_kernel_and_bad_group_counts_are_refused():
    with pytest.raises(DseError, match="allowed: multi_stream, fused"):
        grouped_gemm_time_s(H100, 128, 128, 128, 4, "bf16", "cublas")
    with pytest.raises(DseError, match="groups"):
        grouped_gemm_time_s(H100, 128, 128, 128, 0, "bf16", "fused")
