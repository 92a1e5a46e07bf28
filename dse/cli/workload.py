"""`dse workload import | export | ops`: SimAI/AICB workload files in and out, Chakra traces out."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from dse import paths
from dse._text import short
from dse.cli.listings import new_table
from dse.errors import DseError


def workload_import_command(args: argparse.Namespace, console: Console) -> int:
    import json

    from dse.evaluation.workload import time_simai_workload

    if not args.file.is_file():  # a directory, a FIFO or /dev/zero would fail or never end
        raise DseError(f"file: {args.file} " + ("is not a regular file" if args.file.exists() else "does not exist"))
    parts = time_simai_workload(args.file, args.gpu, num_gpus=args.num_gpus)
    if args.json:
        print(json.dumps(parts, indent=2))
        return 0
    table = new_table(f"{short(args.file.name)} on {args.gpu}", ["part", "seconds"])
    for key, value in parts.items():
        table.add_row(key, f"{value:.6g}")
    console.print(table)
    return 0


def workload_export_command(args: argparse.Namespace, console: Console) -> int:
    from dse.cli.candidate import candidate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.analytical import busiest_stage, simai_workload_of
    from simulators.workload import write_simai_workload

    if args.format == "chakra":
        _check_chakra_flags(args)
    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    params = candidate_params(space, args.set, args.config)
    candidate = space.candidate(params)
    if args.format == "chakra":
        _write_chakra(candidate, args.out, console)
        console.print(f"candidate: {params}")
        return 0
    args.stage = "busiest" if args.stage is None else args.stage
    pp, busiest = candidate.plan.pp, busiest_stage(candidate)
    if isinstance(args.stage, int) and args.stage >= pp:
        raise DseError(f"--stage: {args.stage} is past the plan's last stage; allowed: busiest, all, 0 to {pp - 1}")
    stages = {"busiest": [busiest], "all": list(range(pp))}.get(args.stage, [args.stage])
    files = {stage: _stage_path(args.out, stage, pp) if args.stage == "all" else args.out for stage in stages}
    for path in files.values():
        paths.output_file(path, "--out")
    for stage, path in files.items():
        workload = simai_workload_of(candidate, stage)
        write_simai_workload(workload, path)
        pace = " (the busiest, pacing the pipeline)" if stage == busiest and pp > 1 else ""
        console.print(
            f"wrote {path}: stage {stage} of {pp}{pace}, {len(workload.layers)} rows, {workload.header.ga} "
            f"micro-batches"
        )
    console.print(f"candidate: {params}")
    return 0


CHAKRA_PREFIX = "dse"  # ASTRA-sim's --workload-configuration=OUT/dse reads OUT/dse.<rank>.et
CHAKRA_MAX_RANKS = 4096  # one file per rank: beyond this, gigabytes of traces nobody replays whole


def _check_chakra_flags(args: argparse.Namespace) -> None:
    """Before any work: the flags chakra takes, and an OUT it may fill."""
    if args.stage is not None:
        raise DseError("--stage: --format chakra writes every rank of every stage; leave --stage out")
    paths.output_dir(args.out, "--out")
    if args.out.is_dir() and any(args.out.iterdir()) and not args.force:
        raise DseError(f"--out: {args.out} holds files; allowed: a new or empty directory, or --force to write into it")


def _write_chakra(candidate, out: Path, console: Console) -> None:
    from simulators.analytical import chakra_traces_of
    from simulators.workload import write_chakra_trace

    ranks = candidate.system.num_gpus
    if ranks > CHAKRA_MAX_RANKS:
        raise DseError(
            f"--format chakra: the candidate has {ranks} ranks; allowed: at most {CHAKRA_MAX_RANKS} "
            "(one trace file each)"
        )
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{CHAKRA_PREFIX}.*.et"):  # a larger earlier export's ranks would confuse ASTRA-sim
        stale.unlink()
    nodes = 0
    for rank, trace in chakra_traces_of(candidate):
        write_chakra_trace(out / f"{CHAKRA_PREFIX}.{rank}.et", trace)
        nodes += len(trace)
    console.print(
        f"wrote {out}/{CHAKRA_PREFIX}.0.et ... {CHAKRA_PREFIX}.{ranks - 1}.et: {ranks} ranks, {nodes} nodes, "
        f"{candidate.plan.microbatches} micro-batches ({candidate.plan.pipeline_schedule}); ASTRA-sim: "
        f"--workload-configuration={out}/{CHAKRA_PREFIX}"
    )


def _stage_path(out: Path, stage: int, pp: int) -> Path:
    """FILE.txt -> FILE-stage07.txt (zero-padded, so the files sort in stage order)."""
    return out.with_name(f"{out.stem}-stage{stage:0{len(str(pp - 1))}d}{out.suffix}")


def workload_ops_command(args: argparse.Namespace, console: Console) -> int:
    import dataclasses

    import pandas as pd

    from dse.cli.candidate import candidate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.analytical import busiest_stage
    from simulators.workload import GIB, step_operations, training_memory

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    candidate = space.candidate(candidate_params(space, args.set, args.config))
    if args.csv:
        paths.output_file(args.csv, "--csv")
    ops = pd.DataFrame([dataclasses.asdict(op) for op in step_operations(candidate)])
    if args.csv:
        ops.to_csv(args.csv, index=False)
    busiest = busiest_stage(candidate)
    summary = ops.groupby(["stage", "phase", "kind"], sort=False).agg(
        count=("name", "size"), flops=("flops", "sum"), nbytes=("nbytes", "sum")
    )
    title = "One micro-batch through each pipeline stage, and the step (per GPU)"
    table = new_table(title, ["stage", "phase", "kind", "count", "TFLOP", "GB"])
    for (stage, phase, kind), row in summary.iterrows():
        label = f"{stage} (busiest)" if stage == busiest and candidate.plan.pp > 1 else str(stage)
        table.add_row(
            label, phase, kind, str(int(row["count"])), f"{row['flops'] / 1e12:.4g}", f"{row['nbytes'] / 1e9:.4g}"
        )
    console.print(table)
    memory = training_memory(candidate.model, candidate.plan, candidate.system.memory_reserve_gib)
    console.print(
        f"memory per GPU: weights {memory.weights_bytes / GIB:.2f} GiB, gradients {memory.gradients_bytes / GIB:.2f}, "
        f"optimizer {memory.optimizer_bytes / GIB:.2f}, activations {memory.activations_bytes / GIB:.2f}, "
        f"reserve {memory.reserve_bytes / GIB:.2f}: {memory.total_gib:.2f} GiB"
        + (f"\nwrote {len(ops)} operations to {args.csv}" if args.csv else "")
    )
    return 0
