"""Process CPU time of the pipeline kernel alone on every valid plan of llama70b.yaml.

Why: issue 20 found the discrete-event pipeline kernel (`simulators/analytical/_timeline.py`) the
largest single cost of pricing a fresh plan. This records the exact PipelineBatch the training
model builds for the sweep (the kernel's only input), then times `simulate_pipelines` on it alone,
best of several repeats, per plan and per simulated operation, split by schedule.

    python benchmarks/pipeline_kernel.py [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from training_speed import SPEC, valid_candidates

import simulators.analytical._training as training
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from simulators.analytical import simulate_training_batch
from simulators.analytical._timeline import SCHEDULES, PipelineBatch, simulate_pipelines


def sweep_batch() -> PipelineBatch:
    """The PipelineBatch simulate_training_batch builds for every valid plan of the spec."""
    candidates = valid_candidates(SearchSpace.from_study(resolve_study(load_study(SPEC))))
    seen = []

    def record(batch):
        seen.append(batch)
        return simulate_pipelines(batch)

    original, training.simulate_pipelines = training.simulate_pipelines, record
    try:
        simulate_training_batch(candidates, breakdown=False)
    finally:
        training.simulate_pipelines = original
    return seen[0]


def subset(batch: PipelineBatch, keep: np.ndarray) -> PipelineBatch:
    stages = np.concatenate([np.arange(batch.stage_offset[i], batch.stage_offset[i + 1]) for i in np.flatnonzero(keep)])
    offset = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
    np.cumsum(batch.pp[keep], out=offset[1:])
    per_plan = (batch.pp, batch.chunks, batch.microbatches, batch.schedule, batch.send_s)
    per_stage = (batch.forward_s, batch.backward_s, batch.weight_s)
    return PipelineBatch(*(a[keep] for a in per_plan), offset, *(a[stages] for a in per_stage))


def cpu_s(batch: PipelineBatch, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        simulate_pipelines(batch)
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="repeats per timing; the best is kept")
    args = parser.parse_args()
    batch = sweep_batch()
    simulate_pipelines(batch)  # compile / load the cached kernel
    operations = 2 * batch.pp * batch.chunks * batch.microbatches
    print(f"{len(batch.pp)} plans, {operations.sum():,} operations ({operations.mean():,.0f} per plan)")
    for name, code in [("all", None), *SCHEDULES.items()]:
        keep = np.ones(len(batch.pp), dtype=bool) if code is None else batch.schedule == code
        if not keep.any():
            continue
        seconds = cpu_s(subset(batch, keep), args.repeats)
        print(
            f"{name:12s} {keep.sum():6d} plans: {seconds * 1e3:8.1f} ms CPU = {seconds / keep.sum() * 1e6:6.2f} us "
            f"per plan, {seconds / operations[keep].sum() * 1e9:6.2f} ns per operation"
        )


if __name__ == "__main__":
    main()
