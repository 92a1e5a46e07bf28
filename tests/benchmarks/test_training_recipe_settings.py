"""The training benchmark turns Transformer Engine's TP overlap on only where a run's own
configuration says so, and reduces gradients in bf16 where NVIDIA's performance recipes do."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from benchmarks.accuracy_training import build_plan

CSV = Path(__file__).resolve().parents[2].parent / "shared" / "validation" / "training.csv"


def plan(row_id: str):
    if not CSV.is_file():
        pytest.skip("../shared/validation is not beside this checkout")
    row = next(r for r in csv.DictReader(CSV.open()) if r["id"] == row_id)
    return build_plan(row)


def test_overlap_follows_each_runs_configuration():
    on, assumptions = plan("mlperf30-nvidia-512")  # the submission's config: TP_COMM_OVERLAP=True
    assert on.tp_comm_overlap and "TP comm overlap on, as the recipe's config sets it" in assumptions
    assert plan("mb2606-llama-3.1-405b-h100-1024")[0].tp_comm_overlap  # notes: "TP comm overlap"
    assert not plan("mb2604-qwen3-235b-a22b-h100-256")[0].tp_comm_overlap  # notes: "TP comm overlap off"
    # NeMo 24.07's launcher configs of that release: llama2_70b True, gpt3/175b False
    assert plan("nemo2407-llama-2-70b-64")[0].tp_comm_overlap
    assert not plan("nemo2407-gpt3-175b-128")[0].tp_comm_overlap
    assert not plan("sc21t1-1t")[0].tp_comm_overlap  # 2021: before userbuffers


def test_nemo_2_fp8_runs_reduce_gradients_in_bf16():
    assert plan("nemo2502-nemotron-4-340b-b200-128")[0].grad_reduce_in_bf16
    assert not plan("sc21t1-1t")[0].grad_reduce_in_bf16
