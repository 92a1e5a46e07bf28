"""Per-trial cost of the search loop by study storage, and of one candidate evaluation.

Why: the analytical evaluator takes well under a millisecond, so the study database sets the
pace of a search. This measures the whole ask/evaluate/tell loop (in-process, no Ray) on the
llama70b spec for each storage, and the evaluator alone.

    python benchmarks/storage_overhead.py [--trials 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"


def time_search(trials: int, storage: str | None, out: Path, sampler: str) -> float:
    resolved = resolve_study(load_study(SPEC, **{"budget.trials": trials, "sampler": sampler}))
    start = time.perf_counter()
    run_search(resolved, RunSettings(out, storage, "off"))
    return (time.perf_counter() - start) / trials * 1e3


def time_evaluator(count: int) -> float:
    space = SearchSpace.from_study(resolve_study(load_study(SPEC)))
    evaluator = Evaluator(space)
    params = space.grid()[:count]
    evaluator.evaluate_many(params[:8])  # compile / load the cached kernels
    start = time.perf_counter()
    evaluator.evaluate_many(params)
    return (time.perf_counter() - start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    print(f"evaluator alone: {time_evaluator(2000):.0f} us per candidate")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for sampler in ("random", "tpe"):
            for label, storage in (
                ("journal file (default)", None),
                ("sqlite", f"sqlite:///{tmp / sampler}.db"),
            ):
                out = tmp / f"{sampler}-{label.split()[0]}"
                ms = time_search(args.trials, storage, out, sampler)
                print(f"{sampler:6s} sampler, {label:22s}: {ms:6.1f} ms per trial ({args.trials} trials)")


if __name__ == "__main__":
    main()
