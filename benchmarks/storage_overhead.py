"""The search driver's cost per trial (sampling, study storage, telling) by sampler and storage.

Why: the analytical evaluator takes well under a millisecond, so the driver sets the pace of a
search (issue 20 asks for at most 1 ms per trial beside the evaluations). This runs the llama70b
spec's search loop in process (no Ray, the fidelity ladder off) for each sampler and storage;
the driver's share is the run's wall time less the evaluations' CPU time, per trial.

    python benchmarks/storage_overhead.py [--trials 600]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"


def time_search(trials: int, storage: str | None, out: Path, sampler: str) -> tuple[float, float]:
    """(whole loop, driver alone) in ms per trial."""
    study = load_study(SPEC, **{"budget.trials": trials, "sampler": sampler})
    study = study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")})
    resolved = resolve_study(study)
    start = time.perf_counter()
    summary = run_search(resolved, RunSettings(out, storage, "off"))
    wall_s = time.perf_counter() - start
    return wall_s / trials * 1e3, (wall_s - summary.usage.busy_s) / trials * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=600)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        run_search_warm = resolve_study(load_study(SPEC, **{"budget.trials": 8}))  # compile / load the kernels
        run_search(run_search_warm, RunSettings(tmp / "warm", None, "off"))
        for sampler in ("random", "tpe"):
            for label, storage in (("journal file (default)", None), ("sqlite", f"sqlite:///{tmp / sampler}.db")):
                out = tmp / f"{sampler}-{label.split()[0]}"
                loop_ms, driver_ms = time_search(args.trials, storage, out, sampler)
                print(
                    f"{sampler:6s} sampler, {label:22s}: loop {loop_ms:6.2f} ms per trial, "
                    f"driver {driver_ms:6.2f} ms per trial ({args.trials} trials)"
                )


if __name__ == "__main__":
    main()
