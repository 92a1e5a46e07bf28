"""`dse workload import | export | ops`: SimAI/AICB workload files in and out."""

from __future__ import annotations

import argparse

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
    parts = time_simai_workload(args.file, args.gpu)
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
    from simulators.analytical import simai_workload_of
    from simulators.workload import write_simai_workload

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    params = candidate_params(space, args.set, args.config)
    paths.output_file(args.out, "--out")
    workload = simai_workload_of(space.candidate(params))
    write_simai_workload(workload, args.out)
    console.print(f"wrote {args.out}: {len(workload.layers)} rows, {workload.header.ga} micro-batches of {params}")
    return 0


def workload_ops_command(args: argparse.Namespace, console: Console) -> int:
    import dataclasses

    import pandas as pd

    from dse.cli.candidate import candidate_params
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study
    from simulators.workload import GIB, step_operations, training_memory

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    space = SearchSpace.from_study(resolve_study(study))
    candidate = space.candidate(candidate_params(space, args.set, args.config))
    if args.csv:
        paths.output_file(args.csv, "--csv")
    ops = pd.DataFrame([dataclasses.asdict(op) for op in step_operations(candidate)])
    if args.csv:
        ops.to_csv(args.csv, index=False)
    summary = ops.groupby(["phase", "kind"], sort=False).agg(
        count=("name", "size"), flops=("flops", "sum"), nbytes=("nbytes", "sum")
    )
    table = new_table(
        "One micro-batch through the first stage, and the step (per GPU)", ["phase", "kind", "count", "TFLOP", "GB"]
    )
    for (phase, kind), row in summary.iterrows():
        table.add_row(phase, kind, str(int(row["count"])), f"{row['flops'] / 1e12:.4g}", f"{row['nbytes'] / 1e9:.4g}")
    console.print(table)
    memory = training_memory(candidate.model, candidate.plan, candidate.system.memory_reserve_gib)
    console.print(
        f"memory per GPU: weights {memory.weights_bytes / GIB:.2f} GiB, gradients {memory.gradients_bytes / GIB:.2f}, "
        f"optimizer {memory.optimizer_bytes / GIB:.2f}, activations {memory.activations_bytes / GIB:.2f}, "
        f"reserve {memory.reserve_bytes / GIB:.2f}: {memory.total_gib:.2f} GiB"
        + (f"\nwrote {len(ops)} operations to {args.csv}" if args.csv else "")
    )
    return 0
