"""How well `dse batch` keeps a Ray cluster busy, and what the shared cache saves.

Why: issue 8 asks that evaluations be sized into Ray tasks so a cluster of N CPUs is kept
busy, with the measured utilisation reported, and that a candidate evaluated by one study is
never simulated again by another. This runs the shipped specs as one batch on a local Ray
with every CPU of the machine (or on --ray-address), prints each study's throughput and the
workers' utilisation; then runs the same batch again into a fresh directory that starts from
the first batch's cache file, where nothing should be simulated.

Utilisation is busy CPU-seconds of evaluation (timed inside the tasks) over CPUs x seconds,
both while evaluations were in flight and over the whole run (which includes the drivers'
sampling and telling: the bound on cheap training candidates).

    python benchmarks/batch_throughput.py [--trials 200] [--ray-address local]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from dse.search.batch import CACHE_FILE, load_batch, run_batch

SPECS = ("llama70b", "procurement-llama70b", "mixtral8x7b", "llama70b-serving")
ROOT = Path(__file__).resolve().parents[1]


def batch(out: Path, trials: int, ray_address: str):
    specs = [ROOT / "search_spaces" / f"{name}.yaml" for name in SPECS]
    studies = load_batch(specs, out, {"budget.trials": trials})
    return run_batch(studies, out, ray_address, False, lambda resolved: (None, None))


def show(title: str, result) -> None:
    print(f"\n{title}: {result.wall_s:.1f} s")
    print(f"{'study':24} {'trials':>6} {'simulated':>9} {'shared':>6} {'trials/s':>8}")
    for run in result.runs:
        s = run.summary
        rate = s.finished / s.wall_s if s.wall_s else 0.0
        print(f"{run.resolved.study.name:24} {s.finished:6d} {s.evaluated:9d} {s.shared_hits:6d} {rate:8.1f}")
    finished = sum(r.summary.finished for r in result.runs)
    print(
        f"{'total':24} {finished:6d} {sum(r.summary.evaluated for r in result.runs):9d} "
        f"{sum(r.summary.shared_hits for r in result.runs):6d} {finished / result.wall_s:8.1f}"
    )
    print(result.usage.describe(result.wall_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200, help="trial budget of each study")
    parser.add_argument("--ray-address", default="local")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        first, second = Path(tmp) / "first", Path(tmp) / "second"
        show(
            f"batch of {len(SPECS)} shipped specs, {args.trials} trials each",
            batch(first, args.trials, args.ray_address),
        )
        second.mkdir()
        shutil.copy(first / CACHE_FILE, second / CACHE_FILE)
        show("the same batch again, starting from the first one's cache", batch(second, args.trials, args.ray_address))


if __name__ == "__main__":
    main()
