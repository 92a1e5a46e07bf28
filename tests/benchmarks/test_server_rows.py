"""The accuracy benchmark's mapping of an MLPerf Server row to a simulator run."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks._server_rows import ROUTER, SERVER_SECONDS, server_run

CSV = Path(__file__).resolve().parents[2].parent / "shared" / "validation" / "serving.csv"


def row(row_id: str) -> dict[str, str]:
    if not CSV.is_file():
        pytest.skip("../shared/validation is not beside this checkout")
    return next(r for r in csv.DictReader(CSV.open()) if r["id"] == row_id)


def test_h100_llama2_row_is_four_tp2_replicas_at_75_qps_on_openorca():
    run = server_run(row("mlpinf41-h100x8-llama2-70b-ttft-avg"), "llama2-70b", "fp8")
    assert (run.replicas, run.tp, run.pp) == (4, 2, 1)  # TP2x4 on 8 GPUs (H100_SXM_80GB_TP2x4)
    assert run.qps == 75.0
    assert run.dataset == "mlperf-llama2-70b-openorca"
    assert run.max_batch_requests == 1024  # the config's gpu_batch_size
    assert run.max_batch_tokens == 8192  # no max_num_tokens stated: TensorRT-LLM's default
    assert ROUTER == "least_outstanding" and SERVER_SECONDS == 600.0


def test_h100_mixtral_row_takes_its_stated_token_budget():
    run = server_run(row("mlpinf41-h100x8-mixtral-8x7b-itl-avg"), "mixtral-8x7b", "fp8")
    assert (run.replicas, run.tp, run.qps) == (8, 1, 348.0)
    assert (run.max_batch_requests, run.max_batch_tokens) == (896, 16384)
    assert run.dataset == "mlperf-mixtral-8x7b"


def test_replicas_that_do_not_cover_the_gpus_are_refused():
    bad = dict(row("mlpinf41-h100x8-llama2-70b"), replicas="3")
    with pytest.raises(ValueError, match="replicas 3"):
        server_run(bad, "llama2-70b", "fp8")


def test_a_server_row_whose_prompt_lengths_are_only_bounded_is_refused_by_name_by_default():
    from benchmarks.accuracy_serving import Skip, predict

    with pytest.raises(Skip, match="mlperf-llama2-70b-openorca: only bounds of its prompt lengths"):
        predict(row("mlpinf41-h100x8-llama2-70b-ttft-avg"), offline_requests=10)
