"""Does climbing the fidelity ladder change the answer? Three fabrics where it should.

Why: issue 16 asks for a benchmark on fabrics where contention matters (an oversubscribed
leaf-spine, a rail-optimized fabric with traffic crossing rails, an MoE all-to-all) that shows
the front at each level of the ladder (analytical, flow, packet) and whether the best plan
changed. Each case is a small training study searched exactly (grid), then climbed by the
engine as `dse search` does: the analytical front and its neighbourhood to the flow level, the
flow front and its neighbourhood to the packet level (PFC, ECN, DCQCN). A level's front is that
of the candidates it evaluated, by its own metrics; the best plan is the front's best step
time. "flow within x% of packet" is the largest relative difference of the step time between
the two levels over the candidates both evaluated. `--congestion-control` sets the packet level's
(fidelity.packet.congestion_control: `none` is PFC alone), `--flow-model` the flow level's model
(fidelity.flow.model; unset, the spec's default, fifo).

    python benchmarks/ladder.py [--ray-address off|local] [--congestion-control NAME] [--flow-model fifo|max_min]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from dse.search.engine import RunSettings, run_search
from dse.search.level_records import standings
from dse.search.pareto import pareto_mask
from dse.spec import parse_study
from dse.study import resolve_study

COMMON = """
training: {seq_len: 4096}
objectives: [{iteration_time_s: minimize}, {usd_per_mtok: minimize}]
sampler: grid
budget: {trials: 2000}
fidelity:
  flow: {top: 12, budget_s: 300, message_cap_mb: 16}
  packet: {top: 4, budget_s: 600, message_cap_mb: 2}
"""

CASES = {
    "oversubscribed leaf-spine (Llama-3-70B, 4:1, 16-port leaves)": """
model: llama3-70b
hardware:
  gpu: [H100-SXM]
  num_gpus: [64, 128]
  fabric: {family: [leaf-spine], oversubscription: 4.0, switch_radix: 16}
search: {tp: [2, 4, 8], pp: [1, 2, 4, 8], micro_batch: [1, 2], global_batch: [256], recompute: [selective, full]}
""",
    "rail-optimized, traffic crossing rails (Llama-3-70B, 2:1 spine)": """
model: llama3-70b
hardware:
  gpu: [H100-SXM]
  num_gpus: [128]
  fabric: {family: [rail-optimized], oversubscription: 2.0, switch_radix: 16}
search: {tp: [1, 2, 4, 8], pp: [1, 2, 4, 8], cp: [1, 2], micro_batch: [1], global_batch: [256], recompute: [full]}
""",
    "MoE all-to-all (Mixtral-8x7B, expert parallel across servers, 2:1 leaf-spine)": """
model: mixtral-8x7b
hardware:
  gpu: [H100-SXM]
  num_gpus: [64]
  fabric: {family: [leaf-spine], oversubscription: 2.0, switch_radix: 16}
search: {tp: [1, 2, 4], pp: [1, 2, 4], ep: [1, 2, 4, 8], micro_batch: [1], global_batch: [256], recompute: [full]}
""",
}

PLAN = ("num_gpus", "tp", "pp", "cp", "ep", "micro_batch", "recompute")


def run_case(title: str, body: str, args: argparse.Namespace) -> tuple[bool, float | None]:
    """Print the case's front at each level; returns (best plan changed, largest flow-packet gap)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = yaml.safe_load(COMMON) | yaml.safe_load(body) | {"name": "ladder-case", "output": tmp}
        if args.flow_model is not None:
            raw["fidelity"]["flow"]["model"] = args.flow_model
        if args.congestion_control is not None:
            raw["fidelity"]["packet"]["congestion_control"] = args.congestion_control
        resolved = resolve_study(parse_study(raw))
        started = time.monotonic()
        summary = run_search(resolved, RunSettings(Path(tmp), None, args.ray_address))
        wall_s = time.monotonic() - started
        study = summary.study
        standing = standings(study, resolved)
        trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    print(f"\n## {title}\n")
    print(
        f"{summary.finished} plans searched; " + "; ".join(p.describe() for p in summary.ladder) + f"; {wall_s:.0f} s"
    )
    best = {}
    for level in ("analytical", "flow", "packet"):
        evaluated = {t: s.outcomes[level] for t, s in standing.items() if level in s.outcomes}
        feasible = {t: o for t, o in evaluated.items() if o.feasible and o.metrics}
        if not feasible:
            print(f"{level}: no feasible candidate evaluated")
            continue
        numbers = list(feasible)
        values = [[feasible[t].metrics[m] for m in resolved.objectives] for t in numbers]
        front = [t for t, on in zip(numbers, pareto_mask(values, resolved.directions)) if on]
        front.sort(key=lambda t: feasible[t].metrics["iteration_time_s"])
        best[level] = front[0]
        print(f"{level} front ({len(evaluated)} evaluated):")
        for t in front:
            plan = " ".join(f"{k}={trials[t].params[k]}" for k in PLAN if k in trials[t].params)
            m = feasible[t].metrics
            print(f"  trial {t:>4}  {plan:<58} step {m['iteration_time_s']:.4f} s  {m['usd_per_mtok']:.4f} $/Mtok")
    top = "packet" if "packet" in best else max(best, key=("analytical", "flow", "packet").index)
    changed = best.get(top) != best.get("analytical")
    verdict = "changed" if changed else "same"
    print(f"best plan: analytical trial {best.get('analytical')}, {top} trial {best.get(top)}: {verdict}")
    gaps = [
        abs(s.outcomes["flow"].metrics["iteration_time_s"] / s.outcomes["packet"].metrics["iteration_time_s"] - 1)
        for s in standing.values()
        if {"flow", "packet"} <= set(s.outcomes) and s.outcomes["flow"].metrics and s.outcomes["packet"].metrics
    ]
    return changed, max(gaps, default=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ray-address", default="off", help="off (in this process) or local")
    parser.add_argument("--flow-model", choices=["fifo", "max_min"], help="the flow level's model (unset: the spec's)")
    parser.add_argument("--congestion-control", help="the packet level's (none: PFC alone; unset: the spec's, dcqcn)")
    args = parser.parse_args()
    changed, gaps = 0, []
    for title, body in CASES.items():
        moved, gap = run_case(title, body, args)
        changed += moved
        gaps += [gap] if gap is not None else []
    worst = f"{max(gaps):.1%}" if gaps else "n/a"
    print(f"\nladder: best plan changed in {changed} of {len(CASES)} cases; flow within {worst} of packet")


if __name__ == "__main__":
    main()
