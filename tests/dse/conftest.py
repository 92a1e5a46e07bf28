"""Studies the report tests share: each is searched once per session, in process (no Ray)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dse.cli.commands import main
from tests.conftest import TINY_SPEC

# Three objectives in both directions, two GPU types: every plot of the report has something to show.
REPORT_SPEC = (
    TINY_SPEC.split("objectives:")[0]
    .replace("name: tiny", "name: reported")
    .replace("gpu: [H100-SXM]", "gpu: [H100-SXM, H200]")
    + """
objectives:
  - iteration_time_s
  - tokens_per_s_per_gpu: maximize
  - memory_gib_per_gpu
budget:
  trials: 30
  batch_size: 8
sampler: tpe
seed: 3
"""
)

# No plan fits in 1 GB: every trial is infeasible and the front is empty.
INFEASIBLE_SPEC = """
name: nothing-fits
model: llama3-8b
hardware:
  num_gpus: [8]
search:
  tp: [1, 2]
  pp: [1]
  global_batch: [64]
constraints:
  - metric: memory_gib_per_gpu
    max: 1
budget:
  trials: 6
"""


def _searched(root: Path, spec: str, *flags: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "spec.yaml"
    path.write_text(textwrap.dedent(spec))
    out = root / "out"
    assert main(["search", str(path), "--ray-address", "off", "--out", str(out), *flags]) == 0
    return out


@pytest.fixture(scope="session")
def reported_study(tmp_path_factory) -> Path:
    """The output directory of REPORT_SPEC searched with its budget overridden to 24 trials."""
    return _searched(tmp_path_factory.mktemp("reported"), REPORT_SPEC, "--trials", "24")


@pytest.fixture(scope="session")
def infeasible_study(tmp_path_factory) -> Path:
    return _searched(tmp_path_factory.mktemp("infeasible"), INFEASIBLE_SPEC)
