"""Accuracy of the training memory model against published memory, and the published runs it
would wrongly rule out.

Why: a pessimistic memory model silently removes the best plans from every search, an
optimistic one recommends plans that crash. Two checks:
1. every figure of benchmarks/data/memory_published.csv (per-GPU GiB of Megatron-LM runs, see
   benchmarks/data/README.md) against `training_memory` for the same model and plan;
2. every run of ../shared/validation/training.csv (each ran on real hardware, so each fits),
   read as benchmarks/accuracy_training.py reads it, judged by the same check the search uses
   (no framework reserve, as there): a run judged out of memory is a wrong answer.
The last line is `memory MAPE x% over n rows; infeasible published runs: k`.

    python benchmarks/accuracy_memory.py [--published CSV] [--data training.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

from accuracy_training import DEFAULT_CSV, evaluate_file

from simulators.models import ModelSpec
from simulators.workload import GIB, ParallelPlan, training_memory

PUBLISHED_CSV = Path(__file__).resolve().parent / "data" / "memory_published.csv"
MEGATRON_GPT_VOCAB = 51200  # Megatron's GPT runs of the time (padded GPT-2 vocabulary)


def predicted_gib(row: dict[str, str]) -> float:
    """dse's figure for the row's quantity, for its model and plan (fp16, dropout, unfused
    attention, no distributed optimizer: the settings of those Megatron runs)."""
    hidden = int(row["hidden"])
    model = ModelSpec(
        name=row["model"],
        layers=int(row["layers"]),
        hidden=hidden,
        ffn_hidden=4 * hidden,
        heads=int(row["heads"]),
        kv_heads=int(row["heads"]),
        vocab=MEGATRON_GPT_VOCAB,
        gated_mlp=False,
        tied_embeddings=True,
    )
    tp, pp, micro_batch = int(row["tp"]), int(row["pp"]), int(row["micro_batch"])
    plan = ParallelPlan(
        tp=tp,
        pp=pp,
        dp=1,
        vpp=int(row["vpp"]),
        micro_batch=micro_batch,
        global_batch=int(row["global_batch"]),
        seq_len=int(row["seq_len"]),
        recompute=row["recompute"],
        sequence_parallel=row["sequence_parallel"] == "true",
        zero_stage=0,
        precision="fp16",
        flash_attention=False,
        dropout=True,
    )
    memory = training_memory(model, plan, 0.0)
    if row["quantity"] == "states":
        return (memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes) / GIB
    return memory.activations_bytes / GIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", type=Path, default=PUBLISHED_CSV)
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV, help="runs in the schema of training.csv")
    args = parser.parse_args()

    with args.published.open(newline="", encoding="utf-8") as f:
        published = list(csv.DictReader(f))
    print(f"{'id':22s} {'quantity':12s} {'published GiB':>13s} {'dse GiB':>9s} {'error':>7s}")
    errors = []
    for row in published:
        predicted, measured = predicted_gib(row), float(row["gib"])
        errors.append((predicted / measured - 1) * 100)
        print(f"{row['id']:22s} {row['quantity']:12s} {measured:13.2f} {predicted:9.2f} {errors[-1]:+6.1f}%")

    with args.data.open(newline="", encoding="utf-8") as f:
        outcomes, _ = evaluate_file(list(csv.DictReader(f)))
    judged_oom = {o.row["id"].removesuffix("-b"): o for o in outcomes if o.memory != "fits"}
    runs = {o.row["id"].removesuffix("-b") for o in outcomes}
    print(f"\nPublished runs judged out of memory: {len(judged_oom)} of {len(runs)} runs read from {args.data.name}")
    for run_id, o in sorted(judged_oom.items()):
        r = o.row
        plan = f"tp{r['tp']} pp{r['pp']} dp{r['dp']} vpp{r['vpp'] or '-'} mb{r['micro_batch'] or '-'}"
        plan += f" {r['recompute'] or '-'}"
        print(f"  {run_id:36s} {r['gpu']:9s} {plan:32s} {o.memory}")
    mape = statistics.mean(abs(e) for e in errors)
    print(f"memory MAPE {mape:.1f}% over {len(errors)} rows; infeasible published runs: {len(judged_oom)}")


if __name__ == "__main__":
    main()
