"""Fit the one sustained-compute fraction (simulators/hardware/fitted.yaml) to training.csv.

Why: the component model prices kernels at their best published speed; real stacks sustain
less. One fraction for every GPU type is fitted by minimising the median |log(predicted /
measured)| over every row the model predicts (golden-section search), so no row and no GPU gets a
constant of its own. Also prints leave-one-source-out results: the fraction fitted without a
source, and the error on that source, which is the honest out-of-sample figure.

    python benchmarks/fit_compute_fraction.py [--data PATH]
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
from pathlib import Path

from accuracy_training import DEFAULT_CSV, Skip, evaluate

from simulators import DseError


def rows_predicted(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    usable = []
    for row in rows:
        try:
            evaluate(row, 1.0)
        except (Skip, DseError):
            continue
        usable.append(row)
    return usable


def median_log_error(rows: list[dict[str, str]], fraction: float) -> float:
    return statistics.median(abs(math.log(evaluate(row, fraction).predicted / float(row["value"]))) for row in rows)


def fit(rows: list[dict[str, str]], low: float = 0.4, high: float = 1.0, steps: int = 40) -> float:
    """Golden-section search of the fraction in [low, high]."""
    ratio = (math.sqrt(5) - 1) / 2
    a, b = low, high
    for _ in range(steps):
        c, d = b - ratio * (b - a), a + ratio * (b - a)
        if median_log_error(rows, c) <= median_log_error(rows, d):
            b = d
        else:
            a = c
    return (a + b) / 2


def mape(rows: list[dict[str, str]], fraction: float) -> float:
    return statistics.mean(abs(evaluate(row, fraction).error_pct) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV)
    args = parser.parse_args()
    rows = rows_predicted(args.data)
    fraction = fit(rows)
    print(f"fitted sustained_compute_fraction = {fraction:.3f} over {len(rows)} rows")
    print(f"  in-sample MAPE {mape(rows, fraction):.1f}% (unfitted, fraction 1.0: {mape(rows, 1.0):.1f}%)")
    print("leave one source out (fit on the others, error on the source):")
    for source in sorted({row["source"] for row in rows}):
        held = [row for row in rows if row["source"] == source]
        rest = [row for row in rows if row["source"] != source]
        f = fit(rest)
        print(f"  {source:40s} fraction {f:.3f}  MAPE {mape(held, f):5.1f}% over {len(held)} rows")


if __name__ == "__main__":
    main()
