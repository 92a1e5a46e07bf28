"""Goodput (effective training time) of published large training runs against dse's failure,
checkpoint and restart model (simulators/reliability).

Why: a procurement study that optimises days to train with failures is only as good as the
goodput it predicts. Each row of benchmarks/data/goodput.csv is a published run: its cluster and
plan give the interruption rate (failures.yaml), the checkpoint size and write time
(storage.yaml), the restart time and Daly's interval; the predicted goodput is compared with the
published effective training time. A published lower bound counts as no error when the
prediction is at or above it. The last line is
`goodput: n published runs, effective-time error x pt` (mean absolute error, percentage points).

    python benchmarks/goodput.py [--data CSV]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from simulators.models import get_model
from simulators.network import Fabric
from simulators.reliability import ReliabilityConfig, job_goodput
from simulators.workload import ParallelPlan

DATA = Path(__file__).resolve().parent / "data" / "goodput.csv"


def predicted_pct(row: dict[str, str]) -> tuple[float, str]:
    """dse's effective training time for the row (%) and a one-line account of it."""
    dp = int(row["dp"])
    plan = ParallelPlan(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        cp=int(row["cp"]),
        dp=dp,
        micro_batch=1,
        global_batch=dp,
        seq_len=8192,
        zero_stage=int(row["zero_stage"]),
    )
    gpus = plan.tp * plan.pp * plan.cp * dp
    if gpus != int(row["gpus"]):
        raise ValueError(f"{row['id']}: tp*pp*cp*dp = {gpus}, gpus = {row['gpus']}")
    config = ReliabilityConfig(storage=row["storage"], mode=row["mode"], spare_servers=int(row["spare_servers"]))
    fabric = Fabric(family=row["fabric"], nic_gbps=float(row["nic_gbps"]))
    job = job_goodput(get_model(row["model"]), plan, fabric, config, step_s=float(row["step_s"]))
    g = job.goodput
    account = (
        f"{job.interruptions.total_per_day:.2f} interruptions/day, checkpoint {job.size.total_bytes / 1e12:.2f} TB "
        f"blocking {job.cost.blocking_s:.3g} s every {g.interval_s:.0f} s, restart {g.restart_s:.0f} s; "
        f"shares: checkpoints {g.checkpoint:.3f}, lost work {g.lost_work:.3f}, restarts {g.restarts:.3f}"
    )
    return 100.0 * g.ideal, account


def error_pt(predicted: float, row: dict[str, str]) -> float:
    published = float(row["published_effective_pct"])
    if row["published_is"] == "lower_bound":
        return max(0.0, published - predicted)
    return abs(predicted - published)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    with args.data.open() as handle:
        rows = list(csv.DictReader(handle))
    errors = []
    for row in rows:
        predicted, account = predicted_pct(row)
        bound = ">=" if row["published_is"] == "lower_bound" else "="
        errors.append(error_pt(predicted, row))
        print(f"{row['id']}: published {bound} {row['published_effective_pct']} %, dse {predicted:.1f} % ({account})")
    print(f"goodput: {len(rows)} published runs, effective-time error {statistics.fmean(errors):.1f} pt")


if __name__ == "__main__":
    main()
