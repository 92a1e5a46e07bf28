"""Measured kernel times, and the rule that blends them into the analytical compute model.

Why: the analytical curves of `_compute.py` are built from a handful of published numbers per
GPU; a user who has profiled their own system should be able to substitute what they measured,
and the model should then agree with every measurement exactly while keeping the analytical shape
(wave steps, roofline switch) between and beyond them. The format is described in README.md.

Interpolation rule: for a (gpu, op, precision[, causal, phase]) group with measured shapes
s_1..s_N, each measurement has a correction factor r_i = measured_i / analytical(s_i). A query
shape q whose shape vector equals a measured one returns that measured time. Otherwise the K =
min(4, N) measured shapes nearest in log2 space (Euclidean distance d_i between the vectors of
log2 shape values) give the factor exp(sum w_i ln r_i / sum w_i) with w_i = 1 / d_i^2 (Shepard
weighting), and the time is analytical(q) times that factor. So the factor always lies between
the neighbours' factors, and far from all measurements the analytical curve keeps its shape.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

import numpy as np

from simulators._errors import DseError, SpecError
from simulators.hardware._gpu import PRECISIONS, get_gpu

SHAPE_COLUMNS: Mapping[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k", "batch"),
    "attention": ("batch", "heads", "seq_q", "seq_kv", "head_dim"),
    "elementwise": ("nbytes",),
}
COLUMNS = ("gpu", "op", "precision", "m", "n", "k", "batch", "heads", "seq_q", "seq_kv", "head_dim", "causal", "phase")
COLUMNS += ("nbytes", "time_s", "source")
NEIGHBOURS = 4
BOOLS = {"true": True, "false": False}
PHASES = ("fwd", "bwd")


@dataclass(frozen=True)
class CalibrationPoints:
    """The measured shapes of one group (N x D, in the order of SHAPE_COLUMNS) and their times."""

    shapes: np.ndarray
    time_s: np.ndarray

    def blend(self, query: np.ndarray, analytical_s: np.ndarray, analytical_at_points_s: np.ndarray) -> np.ndarray:
        """Times for `query` (Q x D) given the analytical times there and at the measured shapes
        (the rule of the module docstring)."""
        log_ratio = np.log(self.time_s / analytical_at_points_s)
        log_points, log_query = np.log2(self.shapes), np.log2(query)
        dist2 = np.zeros((len(query), len(self.time_s)))  # Q x N, one dimension at a time
        for dim in range(log_points.shape[1]):
            dist2 += (log_query[:, dim, None] - log_points[None, :, dim]) ** 2
        k = min(NEIGHBOURS, len(self.time_s))
        nearest = np.argpartition(dist2, k - 1, axis=1)[:, :k]
        d2 = np.take_along_axis(dist2, nearest, axis=1)
        exact = d2.min(axis=1) == 0.0
        with np.errstate(divide="ignore"):
            weights = np.where(exact[:, None], 1.0, 1.0 / d2)
        factor = np.exp((weights * log_ratio[nearest]).sum(axis=1) / weights.sum(axis=1))
        measured = self.time_s[nearest[np.arange(len(query)), d2.argmin(axis=1)]]
        return np.where(exact, measured, analytical_s * factor)


@dataclass(frozen=True)
class CalibrationTable:
    """Measured times grouped by (gpu, op, precision, causal, phase); empty fields are None."""

    groups: Mapping[tuple, CalibrationPoints]

    def points(
        self, gpu: str, op: str, precision: str | None, causal: bool | None = None, phase: str | None = None
    ) -> CalibrationPoints | None:
        """The measurements of one group, or None when the table has none for it."""
        return self.groups.get((gpu, op, precision, causal, phase))


def load_calibration(path: str | Path) -> CalibrationTable:
    """Read and validate a calibration CSV (README.md); a bad row raises SpecError naming the
    file, the line, the column, the value and what is allowed."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        return parse_calibration(f, path.name)


def parse_calibration(lines: Iterable[str], label: str) -> CalibrationTable:
    """The table in the CSV `lines` (as `load_calibration`; `label` names the file in errors), for
    callers that read the file themselves under their own limits."""
    reader = csv.DictReader(lines)
    try:
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise SpecError(f"{label}: missing columns {', '.join(missing)}; required: {', '.join(COLUMNS)}")
        rows = [_parse_row(label, line, row) for line, row in enumerate(reader, start=2)]
    except csv.Error as exc:  # a NUL byte, an unclosed quote, a field over csv's size limit
        raise SpecError(f"{label} line {reader.line_num}: not a CSV row ({exc})") from None
    return _group_rows(rows, label)


def _group_rows(rows: Sequence[tuple[tuple, tuple[float, ...], float, int]], label: str) -> CalibrationTable:
    """Group parsed rows (key, shape, time_s, line) into a table; a shape measured twice in
    one group is ambiguous and raises."""
    grouped: dict[tuple, dict[tuple[float, ...], tuple[float, int]]] = {}
    for key, shape, time_s, line in rows:
        seen = grouped.setdefault(key, {})
        if shape in seen:
            raise SpecError(f"{label} line {line}: shape {shape} of {key} is already measured on line {seen[shape][1]}")
        seen[shape] = (time_s, line)
    groups = {}
    for key, measured in grouped.items():
        shapes, times = np.array(list(measured), dtype=float), np.array([t for t, _ in measured.values()])
        shapes.setflags(write=False)
        times.setflags(write=False)
        groups[key] = CalibrationPoints(shapes, times)
    return CalibrationTable(MappingProxyType(groups))


def _parse_row(label: str, line: int, row: Mapping[str, str | None]) -> tuple[tuple, tuple[float, ...], float, int]:
    def cell(column: str) -> str:
        return (row.get(column) or "").strip()

    def fail(column: str, allowed: str) -> DseError:
        return SpecError(f"{label} line {line}: {column}: {cell(column)!r} is not allowed; {allowed}")

    gpu = get_gpu(cell("gpu"), field=f"{label} line {line}: gpu").name
    op = cell("op")
    if op not in SHAPE_COLUMNS:
        raise fail("op", f"allowed: {', '.join(SHAPE_COLUMNS)}")
    shape = tuple(_positive(cell(c), c, fail) for c in SHAPE_COLUMNS[op])
    precision = cell("precision") or None
    if op != "elementwise" and precision not in PRECISIONS:
        raise fail("precision", f"gemm and attention rows need one of {', '.join(PRECISIONS)}")
    causal = phase = None
    if op == "attention":
        causal = BOOLS.get(cell("causal").lower())
        if causal is None:
            raise fail("causal", "allowed: true, false")
        phase = cell("phase")
        if phase not in PHASES:
            raise fail("phase", f"allowed: {', '.join(PHASES)}")
    time_s = _positive(cell("time_s"), "time_s", fail)
    if not cell("source"):
        raise fail("source", "every measurement needs a source (who measured it, where, with what software)")
    return (gpu, op, None if op == "elementwise" else precision, causal, phase), shape, time_s, line


def _positive(text: str, column: str, fail) -> float:
    try:
        value = float(text)
    except ValueError:
        raise fail(column, "must be a number > 0") from None
    if not (value > 0 and math.isfinite(value)):
        raise fail(column, "must be a number > 0")
    return value


@cache
def calibration_table(path: str | None) -> CalibrationTable | None:
    """The table in `path`, loaded once per process (candidates of a study share it), or None
    for the analytical curves."""
    return load_calibration(path) if path else None
