"""Fit the training model's constants (simulators/hardware/fitted.yaml) to the published runs.

Why: the component model prices kernels at their best published speed and the host as free;
real stacks sustain less, and small kernels wait for the host that launches them. Two kinds of
constant are fitted, each over every row that informs it, never to one row:
- `sustained_compute_fraction`, one value for every GPU type, over all public rows of
  training.csv;
- `host_launch_s` per GPU type, over that GPU type's rows of training.csv and of the ranking
  file (only small models and micro-batches move it; a GPU type whose rows do not move it keeps
  the default, the median of the fitted ones).
The objective is the mean over sources of each source's median |log(predicted / measured)|, so
a source with 1,440 rows weighs as much as one with 10. Golden-section search, one constant at
a time (fraction first, at the default host time; then each host time). Then leave one source
out: the constants refitted without it, and the error on it, the honest out-of-sample figure.

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

Row = dict[str, str]


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


def log_errors(rows: list[Row], by_id: dict[str, Row], fraction: float, host: dict[str, float]) -> dict[str, list]:
    """|log(predicted / measured)| per source."""
    errors = defaultdict(list)
    for row in rows:
        predicted = evaluate(row, fraction, host.get(row["gpu"], host["default"]), by_id).predicted
        errors[row["source"]].append(abs(math.log(predicted / float(row["value"]))))
    return errors


def objective(rows: list[Row], by_id: dict[str, Row], fraction: float, host: dict[str, float]) -> float:
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


def fit(
    public: list[Row], ranking: list[Row], by_id: dict[str, Row], steps: int = 18
) -> tuple[float, dict[str, float]]:
    """The fraction over the public rows, then each GPU type's host time over its rows. A GPU
    type whose rows the host time does not move (objective within 1 % over the whole range)
    does not identify it and gets the default, the median of the identified ones (0 where the
    best value sits at 0: those rows do not wait for the host)."""
    host = {"default": 0.0}
    fraction = golden(lambda x: objective(public, by_id, x, host), 0.4, 1.0, steps)
    rows = public + ranking
    for gpu in sorted({row["gpu"] for row in rows}):
        mine = [row for row in rows if row["gpu"] == gpu]
        ends = [objective(mine, by_id, fraction, {**host, gpu: x}) for x in HOST_RANGE_S]
        best = golden(
            lambda x, mine=mine, gpu=gpu: objective(mine, by_id, fraction, {**host, gpu: x}), *HOST_RANGE_S, steps
        )
        if objective(mine, by_id, fraction, {**host, gpu: best}) < 0.99 * max(ends):
            host[gpu] = best
    fitted = [v for k, v in host.items() if k != "default"]
    host["default"] = statistics.median(fitted) if fitted else 0.0
    return fraction, host


def mape(rows: list[Row], by_id: dict[str, Row], fraction: float, host: dict[str, float]) -> float:
    return statistics.mean(
        abs(evaluate(r, fraction, host.get(r["gpu"], host["default"]), by_id).error_pct) for r in rows
    )


def describe(fraction: float, host: dict[str, float]) -> str:
    times = ", ".join(f"{gpu} {value * 1e6:.1f} us" for gpu, value in host.items())
    return f"fraction {fraction:.3f}; host_launch_s {times}"


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
    print(f"fitted over {len(public)} public and {len(ranking)} ranking rows: {describe(fraction, host)}")
    every = public + ranking
    print(
        f"  in-sample MAPE {mape(public, by_id, fraction, host):.1f}% (public), "
        f"{mape(ranking, by_id, fraction, host):.1f}% (ranking) "
        f"(unfitted, fraction 1.0 and no host time: {mape(public, by_id, 1.0, {'default': 0.0}):.1f}%, "
        f"{mape(ranking, by_id, 1.0, {'default': 0.0}):.1f}%)"
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
