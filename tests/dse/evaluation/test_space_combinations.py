"""SearchSpace.combinations: any range of knob combinations decoded from its numbers, against
skipping to it in itertools.product (what it replaced), across the blocks it decodes in."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import dse.evaluation.space as space_module
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("spec", ["llama70b.yaml", "llama70b-serving.yaml"])
def test_every_range_of_combinations_is_the_products_with_the_very_values(spec, monkeypatch):
    monkeypatch.setattr(space_module, "COMBINATION_BLOCK", 7)  # ranges cross blocks, as 10^7 spaces do
    space = SearchSpace.from_study(resolve_study(load_study(ROOT / "search_spaces" / spec)))
    product = list(itertools.product(*space.values.values()))
    for start, stop in [(0, 1), (0, 20), (5, 6), (6, 22), (len(product) // 3, len(product) // 3 + 50)]:
        got = list(space.combinations(start, stop))
        assert got == product[start:stop]
        # the knob values themselves (a Python bool or int), not numpy scalars that only compare equal
        assert [tuple(map(type, c)) for c in got] == [tuple(map(type, c)) for c in product[start:stop]]
    tail = list(space.combinations(len(product) - 9, len(product)))
    assert tail == product[-9:] and list(space.combinations(len(product), len(product))) == []
    assert len(list(space.distinct_plans(len(product) - 9, len(product) + 100))) <= 9  # stop past the end: clamped
