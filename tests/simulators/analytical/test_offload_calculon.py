"""dse's offload against Calculon's stored run (benchmarks/data/calculon_offload.json) on the
same plan: the optimizer state both move to the second tier is 12 bytes per parameter (the
times differ by mechanism and are compared in benchmarks/offload.py)."""

import json
from pathlib import Path

import pytest

from benchmarks.offload import REFERENCE, dse_candidate
from simulators.analytical import simulate_training


def reference() -> dict:
    return json.loads(Path(REFERENCE).read_text())


def test_the_optimizer_state_moved_matches_calculon():
    ref = reference()
    result = simulate_training(dse_candidate(ref, "optimizer"))
    # Calculon has no embedding and dse's benchmark model has 8 tokens of vocabulary: the layers'
    # parameters (with their norms and biases counted slightly differently) set both.
    calculon = ref["outputs"]["optimizer"]["optimizer_space"]
    assert result.memory.host_optimizer_bytes == pytest.approx(calculon, rel=1e-3)
