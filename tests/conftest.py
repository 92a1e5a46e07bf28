"""Shared fixtures: small study specs written to a temporary directory."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

TINY_SPEC = """
name: tiny
model: llama3-8b
training:
  seq_len: 4096
hardware:
  gpu: [H100-SXM]
  num_gpus: [8, 16]
search:
  tp: [1, 2, 4]
  pp: [1, 2]
  micro_batch: [1, 2]
  global_batch: [64]
  recompute: [none, full]
objectives:
  - tokens_per_s_per_gpu: maximize
  - usd_per_mtok: minimize
budget:
  trials: 30
  batch_size: 8
sampler: tpe
seed: 7
"""


# A small inference study: 2 tp x 2 replica counts x 2 schedulers, with and without disaggregation.
SERVING_SPEC = """
name: tiny-serving
mode: inference
model: llama3-8b
serving:
  requests: 300
  prompt: {dist: uniform, low: 64, high: 1024}
  output: {dist: uniform, low: 8, high: 128}
  ttft_p90_s: 1.0
  tbt_p99_s: 0.1
hardware:
  gpu: [H100-SXM]
search:
  tp: [1, 2]
  replicas: [1, 2]
  scheduler: [vllm, sarathi]
  disaggregated: [false, true]
  decode_tp: [1, 2]
budget:
  trials: 12
  batch_size: 4
sampler: tpe
seed: 5
"""


# Two fabrics of 64 H100s, tensor and pipeline parallelism of 1 or 2: the data-parallel rings cross
# servers, so the fidelity ladder has collectives to re-price (8 plans, searched exactly).
FABRIC_SPEC = """
name: fabrics
model: llama3-8b
training: {seq_len: 2048}
hardware:
  gpu: [H100-SXM]
  num_gpus: [64]
  fabric: {family: [rail-optimized, leaf-spine]}
search:
  tp: [1, 2]
  pp: [1, 2]
  micro_batch: [1]
  global_batch: [128]
  recompute: [none]
objectives:
  - iteration_time_s: minimize
  - usd_per_mtok: minimize
fidelity:
  flow: null
  packet: {top: 3, message_cap_mb: 1}
budget: {trials: 8, batch_size: 8}
sampler: grid
"""


# A study whose pipeline shapes take layouts (training.pipeline_layouts): llama3-8b (32 layers) on
# 16 H100s; pp 4 x vpp 3 = 12 divides neither 32 nor 32+2, so only its layout runs it; pp 2 takes
# an uneven one.
FOUR_BY_THREE = [1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1]
LAYOUTS_SPEC = f"""
name: layouts
model: llama3-8b
training:
  seq_len: 4096
  pipeline_layouts:
    - {{pp: 4, vpp: 3, layers: {FOUR_BY_THREE}}}
    - {{pp: 2, layers: [12, 20]}}
hardware:
  gpu: [H100-SXM]
  num_gpus: [16]
search:
  tp: [1, 2]
  pp: [1, 2, 4]
  vpp: [1, 3]
  micro_batch: [1]
  global_batch: [64]
  recompute: [none]
objectives:
  - iteration_time_s: minimize
sampler: grid
"""


# One candidate of TINY_SPEC: every knob set (8 H100s, tp=pp=1, 8 micro-batches of 1).
TINY_PARAMS = {
    "gpu": "H100-SXM",
    "num_gpus": 8,
    "tp": 1,
    "pp": 1,
    "cp": 1,
    "ep": 1,
    "etp": 1,
    "vpp": 1,
    "micro_batch": 1,
    "global_batch": 64,
    "recompute": "none",
    "schedule": "1f1b",
    "sequence_parallel": True,
    "zero_stage": 1,
    "fabric": "rail-optimized",
    "nic_gbps": 400,
}


@pytest.fixture
def write_spec(tmp_path: Path):
    """Write a spec (default: the tiny one) and return its path; `extra` is appended YAML."""

    def write(text: str = TINY_SPEC, extra: str = "", name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text) + textwrap.dedent(extra))
        return path

    return write


@pytest.fixture(autouse=True)
def fresh_fidelity_runs(monkeypatch):
    """Each test times its own fidelity runs: the runs a process shares across candidates
    (simulators/fidelity/_contention.py) would otherwise carry one test's runs into the next."""
    from simulators.fidelity import _contention

    monkeypatch.setattr(_contention, "_RUNS", {})
