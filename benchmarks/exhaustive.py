"""The exact mode on a space of about a million plans: every distinct plan recorded, the front kept.

Why: issue 20 asks for the exact Pareto front of a 10^6-plan space in at most 60 s on 2 cores,
with every plan recorded (Parquet) and only the front in the study database. The space is
search_spaces/llama70b.yaml widened to three GPU types, seven cluster sizes, three NIC speeds,
four vpp values, four micro-batches, three ZeRO stages and two offload choices (1.45 million
combinations); the run is
`dse search --sampler exhaustive --fidelity analytical` as a user would start it (a private
local Ray on every core, or `--ray-address off`), timed from start to the front stored. A plan
is simulated unless it cannot be built, does not fit in memory, or its step floor is dominated
by the plans found before it (dse/search/exhaustive.py: pruned, the front unchanged).

    python benchmarks/exhaustive.py [--ray-address local|off] [--gpus N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from dse.evaluation.space import SearchSpace
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"
WIDER = {
    "hardware.gpu": ["H100-SXM", "H200", "B200"],
    "hardware.num_gpus": [64, 128, 256, 512, 1024, 2048, 4096],
    "hardware.fabric.nic_gbps": [200, 400, 800],
    "search.vpp": [1, 2, 4, 5],
    "search.micro_batch": [1, 2, 4, 8],
    "search.zero_stage": [0, 1, 3],
    "search.offload": ["none", "optimizer"],
    "sampler": "exhaustive",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray-address", default="local", help="local (default) or off")
    args = parser.parse_args()
    study = load_study(SPEC, **WIDER)
    study = study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")})
    resolved = resolve_study(study)
    print(f"space: {SearchSpace.from_study(resolved).size:,} knob combinations")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        summary = run_search(resolved, RunSettings(Path(tmp), None, args.ray_address))
        wall_s = time.perf_counter() - start
        parts = sum(1 for _ in (Path(tmp) / "plans").glob("part-*.parquet"))
        size_mb = sum(p.stat().st_size for p in (Path(tmp) / "plans").glob("part-*.parquet")) / 1e6
    record = summary.exhaustive
    print(f"{summary.usage.describe(wall_s)}")
    print(
        f"record: {record.plans:,} plans ({record.pruned:,} pruned at their step floor, {record.feasible:,} "
        f"simulated and feasible) in {parts} Parquet parts, {size_mb:.1f} MB"
    )
    print(f"whole run (Ray start, enumeration, evaluation, records, front stored): {wall_s:.1f} s")
    rate = record.evaluated / wall_s
    print(
        f"exhaustive: {record.evaluated} plans in {wall_s:.1f} s = {rate:,.0f} plans/s on {summary.usage.cpus} CPUs; "
        f"front {record.front}"
    )


if __name__ == "__main__":
    main()
