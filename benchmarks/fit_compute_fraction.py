"""Fit the training model's constants (simulators/hardware/fitted.yaml) to the published runs.

Why: the component model prices kernels at their best published speed and the host as free;
real stacks sustain less, and small kernels wait for the host that launches them. One set of
constants per software stack (a GPU type, or the type its gpus.yaml `calibrated_like` names),
each fitted over every row of that stack, never to one row:
- `sustained_compute_fraction`, over the stack's public rows of training.csv (its ranking-file
  rows where it has no public ones);
- `host_launch_s`, over the stack's rows of training.csv and of the ranking file (only small
  models and micro-batches move it; a stack whose rows do not move it keeps the default).
The defaults, for GPU types without measurements, are the medians of the fitted values. The
objective is the mean over sources of each source's median |log(predicted / measured)|, so a
source with 1,440 rows weighs as much as one with 10. Golden-section search, one constant at a
time (fraction at no host time, then host time, then both once more). Then leave one source out:
the constants refitted without it, and the error on it, the honest out-of-sample figure.

    python benchmarks/fit_compute_fraction.py [--data PATH ...]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from accuracy_training import DEFAULT_CSV, RANKING_CSV, Skip, evaluate, is_ranking_file

from simulators import DseError
from simulators.hardware import get_gpu

Row = dict[str, str]
Constants = dict[str, float]  # by software stack, with "default" for the others


def rows_predicted(path: Path) -> tuple[list[Row], dict[str, Row], bool]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_id = {row["id"]: row for row in rows}
    usable = []
    for row in rows:
        try:
            evaluate(row, 1.0, 0.0, by_id)
        except (Skip, DseError):
            continue
        usable.append(row)
    return usable, by_id, is_ranking_file(rows)


def stack_of(row: Row) -> str:
    """The software stack whose constants the row's GPU takes (gpus.yaml `calibrated_like`)."""
    gpu = get_gpu(row["gpu"])
    return gpu.calibrated_like or gpu.name


def predicted(row: Row, by_id: dict[str, Row], fraction: Constants, host: Constants):
    stack = stack_of(row)
    return evaluate(row, fraction.get(stack, fraction["default"]), host.get(stack, host["default"]), by_id)


def log_errors(rows: list[Row], by_id: dict[str, Row], fraction: Constants, host: Constants) -> dict[str, list]:
    """|log(predicted / measured)| per source."""
    errors = defaultdict(list)
    for row in rows:
        errors[row["source"]].append(
            abs(math.log(predicted(row, by_id, fraction, host).predicted / float(row["value"])))
        )
    return errors


def objective(rows: list[Row], by_id: dict[str, Row], fraction: Constants, host: Constants) -> float:
    errors = log_errors(rows, by_id, fraction, host)
    return statistics.mean(statistics.median(e) for e in errors.values()) if errors else 0.0


def golden(f: Callable[[float], float], low: float, high: float, steps: int = 18) -> float:
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    for _ in range(steps):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if f(c) <= f(d):
            b = d
        else:
            a = c
    return (a + b) / 2


HOST_RANGE_S = (0.0, 150e-6)
UNFITTED = {"default": 1.0}


def fit(public: list[Row], ranking: list[Row], by_id: dict[str, Row], steps: int = 18) -> tuple[Constants, Constants]:
    """Each stack's fraction and host time over its own rows (module docstring); then the
    defaults, the medians of the fitted values."""
    fraction, host = {}, {}
    for stack in sorted({stack_of(row) for row in public + ranking}):
        mine = [row for row in public + ranking if stack_of(row) == stack]
        for_fraction = [row for row in public if stack_of(row) == stack] or mine
        fraction[stack], host_s = fit_stack(for_fraction, mine, by_id, steps)
        if host_s is not None:
            host[stack] = host_s
    fraction["default"] = statistics.median(fraction.values())
    host["default"] = statistics.median(host.values()) if host else 0.0
    for stack in fraction:
        host.setdefault(stack, host["default"])
    return fraction, host


def fit_stack(
    for_fraction: list[Row], rows: list[Row], by_id: dict[str, Row], steps: int
) -> tuple[float, float | None]:
    """One stack's fraction (over `for_fraction`) and host time (over `rows`), each at the other's
    value, twice over. The host time is None where the rows do not identify it (the objective
    within 1 % over the whole range): 0 is best or it hardly matters; the stack takes the default."""
    host_s: float | None = None
    for _ in range(2):
        at_host = {"default": host_s or 0.0}
        fraction = golden(
            lambda x, at_host=at_host: objective(for_fraction, by_id, {"default": x}, at_host), 0.4, 1.0, steps
        )

        def with_host(x: float, fraction: float = fraction) -> float:
            return objective(rows, by_id, {"default": fraction}, {"default": x})

        best = golden(with_host, *HOST_RANGE_S, steps)
        host_s = best if with_host(best) < 0.99 * max(with_host(x) for x in HOST_RANGE_S) else None
    return fraction, host_s


def mape(rows: list[Row], by_id: dict[str, Row], fraction: Constants, host: Constants) -> float:
    return statistics.mean(abs(predicted(r, by_id, fraction, host).error_pct) for r in rows)


def describe(fraction: Constants, host: Constants) -> str:
    return "; ".join(f"{stack} {fraction[stack]:.3f}, {host[stack] * 1e6:.1f} us" for stack in fraction)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, action="append")
    args = parser.parse_args()
    public, ranking, by_id = [], [], {}
    for path in args.data or [DEFAULT_CSV, RANKING_CSV]:
        rows, ids, is_ranking = rows_predicted(path)
        (ranking if is_ranking else public).extend(rows)
        by_id.update(ids)
    fraction, host = fit(public, ranking, by_id)
    print(f"fitted over {len(public)} public and {len(ranking)} ranking rows (fraction, host_launch_s by stack):")
    print(f"  {describe(fraction, host)}")
    every = public + ranking
    print(
        f"  in-sample MAPE {mape(public, by_id, fraction, host):.1f}% (public), "
        f"{mape(ranking, by_id, fraction, host):.1f}% (ranking) "
        f"(unfitted, fraction 1.0 and no host time: {mape(public, by_id, UNFITTED, {'default': 0.0}):.1f}%, "
        f"{mape(ranking, by_id, UNFITTED, {'default': 0.0}):.1f}%)"
    )
    print("leave one source out (fit on the others, error on the source):")
    for source in sorted({row["source"] for row in every}):
        held = [row for row in every if row["source"] == source]
        f, h = fit(
            [r for r in public if r["source"] != source], [r for r in ranking if r["source"] != source], by_id, 12
        )
        print(f"  {source:42s} MAPE {mape(held, by_id, f, h):5.1f}% over {len(held):4d} rows  ({describe(f, h)})")


if __name__ == "__main__":
    main()
