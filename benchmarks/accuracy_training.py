"""Accuracy of the first analytical training model against published training measurements.

Why: before the search trusts `simulate_training`, we need to know how far it is from real runs.
This replays every row of ../shared/validation/training.csv (see its README) through the model,
with nothing fitted or tuned, converts the prediction to the row's metric (step time, tokens/s per
GPU, TFLOP/s per GPU in the row's FLOP convention, or MFU against the README's peaks) and reports
the signed error (predicted / measured - 1) per row, overall and per source, and ends with the
line `MAPE <x>% over <n> rows`. Rows the model cannot represent are listed with the reason.

    python benchmarks/accuracy_training.py [--data PATH] [--out results.csv]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from simulators import DseError
from simulators.analytical import simulate_training
from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import ModelSpec
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, logits_gemm, model_flops

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "../shared/validation/training.csv").resolve()
ARCH_FIELDS = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")
PARALLEL_FIELDS = ("tp", "pp", "dp", "micro_batch")
BOOLS = {"true": True, "false": False, "": None}
# Dense FP16/BF16 peaks of the README's "Peak throughput used for MFU" table, TFLOP/s.
README_PEAK_TFLOPS = {
    "V100-32GB": 125,
    "A100-40GB": 312,
    "A100-80GB": 312,
    "H100-SXM": 989,
    "H800": 989,
    "H200": 989,
    "B200": 2250,
    "GB200": 2500,
}


class Skip(Exception):
    """The row cannot be represented by the model; the message is the grouped reason."""


@dataclass(frozen=True)
class Outcome:
    row: dict[str, str]
    predicted: float
    memory: str  # "fits", or "OOM <needed>/<capacity> GB"
    assumptions: tuple[str, ...]

    @property
    def measured(self) -> float:
        return float(self.row["value"])

    @property
    def error_pct(self) -> float:
        return (self.predicted / self.measured - 1) * 100


def _int(row: dict[str, str], column: str) -> int | None:
    return int(row[column]) if row[column] else None


def build_model(row: dict[str, str]) -> ModelSpec:
    missing = [c for c in ARCH_FIELDS if not row[c]]
    if missing:
        raise Skip(f"architecture not stated: {', '.join(missing)}")
    hidden, heads = int(row["hidden"]), int(row["heads"])
    if hidden % heads:
        raise Skip("hidden not a multiple of heads and head_dim not stated")
    try:
        return ModelSpec(
            name=row["model"],
            layers=int(row["layers"]),
            hidden=hidden,
            ffn_hidden=int(row["ffn_hidden"]),
            heads=heads,
            kv_heads=int(row["kv_heads"]),
            head_dim=hidden // heads,
            vocab=int(row["vocab"]),
            # Llama uses SwiGLU; GPT (GeLU) and Nemotron (squared ReLU) use non-gated 2-matrix MLPs.
            gated_mlp="Llama" in row["model"] or "Mixtral" in row["model"],
            tied_embeddings=False,
            moe_experts=_int(row, "moe_experts"),
            moe_top_k=_int(row, "moe_topk"),
            moe_ffn_hidden=_int(row, "moe_ffn_hidden"),
        )
    except ValidationError as exc:
        raise Skip(f"invalid model shape: {exc.errors()[0]['msg']}") from None


def build_plan(row: dict[str, str]) -> tuple[ParallelPlan, list[str]]:
    """The row's plan, and the assumptions made for fields the source does not state."""
    missing = [c for c in PARALLEL_FIELDS if not row[c]]
    if missing:
        raise Skip(f"not stated: {'/'.join(missing)}")
    tp, pp, dp, cp = _int(row, "tp"), _int(row, "pp"), _int(row, "dp"), _int(row, "cp") or 1
    if tp * pp * dp * cp != int(row["num_gpus"]):
        raise Skip("tp*pp*dp*cp differs from num_gpus")
    assumptions = []
    recompute, precision = row["recompute"], row["precision"]
    if not recompute:
        if precision not in ("bf16", "fp8"):
            raise Skip("recompute not stated (fp16-era row)")
        recompute = "none"
        assumptions.append("recompute not stated; assumed none")
    sequence_parallel = BOOLS[row["seq_parallel"]]
    if sequence_parallel is None:
        sequence_parallel = tp > 1
        assumptions.append("seq_parallel not stated; assumed tp > 1")
    distributed_optimizer = BOOLS[row["dist_optimizer"]]
    if distributed_optimizer is None:
        distributed_optimizer = True
        assumptions.append("dist_optimizer not stated; assumed true")
    if (_int(row, "ep") or 1) > 1:
        assumptions.append("ep given; experts spread over dp*cp ranks")
    if not row["vpp"]:
        assumptions.append("vpp not stated; assumed 1")
    # DeepSpeed of the time put data-parallel traffic on the critical path: its `overlap_comm`
    # defaults to false (deepspeed.ai/docs/config-json), and ZeRO-3's parameter all-gather
    # synchronised the device before each gather (DeepSpeed PR #1188, June 2021: "the async
    # version is not async at all, because each all_gather calls torch.cuda.synchronize()").
    deepspeed = "DeepSpeed" in row["notes"]
    plan = ParallelPlan(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=_int(row, "micro_batch"),
        global_batch=int(row["global_batch"]),
        seq_len=int(row["seq_len"]),
        cp=cp,
        ep=_int(row, "ep") or 1,
        vpp=_int(row, "vpp") or 1,
        recompute=recompute,
        sequence_parallel=sequence_parallel,
        zero_stage=(3 if "ZeRO-3" in row["notes"] else 1) if distributed_optimizer else 0,
        # FlashAttention appeared in 2022: runs published before it computed attention unfused.
        flash_attention=not any(year in row["source"] for year in ("2019", "2020", "2021")),
        precision=precision,
        overlap_grad_reduce=not deepspeed,
        overlap_param_gather=not deepspeed,
    )
    return plan, assumptions


def step_flops(model: ModelSpec, plan: ParallelPlan, convention: str) -> float:
    """FLOPs of one step per the README's conventions; `hardware` adds the recomputed forward
    of the transformer layers (not of the logit layer): F_hw = F_model + (F_model - 6Bshv) / 3."""
    flops = model_flops(model, plan.global_batch, plan.seq_len)
    if convention == "hardware" and plan.recompute == "full":
        logits = 3 * logits_gemm(model, plan.global_batch, plan.seq_len, tp=1).flops
        flops += (flops - logits) / 3
    return flops


def evaluate(row: dict[str, str], compute_fraction: float | None = None) -> Outcome:
    """The row predicted with `compute_fraction` (default: the fitted one users get)."""
    model = build_model(row)
    plan, assumptions = build_plan(row)
    gpu, num_gpus = get_gpu(row["gpu"]), int(row["num_gpus"])
    fraction = sustained_compute_fraction() if compute_fraction is None else compute_fraction
    system = TrainingSystem(gpu, num_gpus, memory_reserve_gb=0.0, compute_fraction=fraction)
    result = simulate_training(TrainingCandidate(model, system, plan))
    time_s = result.metrics["iteration_time_s"]
    predicted = {
        "iteration_time_s": time_s,
        "tokens_per_s_per_gpu": result.metrics["tokens_per_s_per_gpu"],
        "tflops_per_gpu": step_flops(model, plan, row["flop_convention"] or "model") / (time_s * num_gpus) / 1e12,
        "mfu": step_flops(model, plan, "model") / (time_s * num_gpus) / (README_PEAK_TFLOPS[gpu.name] * 1e12),
    }[row["metric"]]
    memory = "fits" if result.feasible else f"OOM {result.memory.total_gb:.0f}/{gpu.hbm_bytes / 1e9:.0f} GB"
    return Outcome(row, predicted, memory, tuple(assumptions))


def print_rows(outcomes: list[Outcome]) -> None:
    print(
        f"{'id':30s} {'model':17s} {'gpu':9s} {'gpus':>5s} {'tp/pp/dp':>10s} {'metric':20s} "
        f"{'measured':>9s} {'predicted':>9s} {'error':>7s}  memory"
    )
    for o in outcomes:
        r = o.row
        print(
            f"{r['id']:30s} {r['model'][:17]:17s} {r['gpu']:9s} {r['num_gpus']:>5s} "
            f"{r['tp'] + '/' + r['pp'] + '/' + r['dp']:>10s} {r['metric']:20s} {o.measured:9.4g} "
            f"{o.predicted:9.4g} {o.error_pct:+6.1f}%  {o.memory}"
        )


def summary(label: str, outcomes: list[Outcome]) -> str:
    errors = [o.error_pct for o in outcomes]
    magnitudes = [abs(e) for e in errors]
    worst = max(outcomes, key=lambda o: abs(o.error_pct))
    return (
        f"  {label:44s} n={len(errors):3d}  median|e|={statistics.median(magnitudes):5.1f}%  "
        f"mean|e|={statistics.mean(magnitudes):5.1f}%  max|e|={max(magnitudes):5.1f}% ({worst.row['id']})  "
        f"bias={statistics.mean(errors):+6.1f}%"
    )


def print_summary(title: str, outcomes: list[Outcome]) -> None:
    print(f"\n{title}")
    if not outcomes:
        print("  no rows")
        return
    print(summary("all rows", outcomes))
    by_source = defaultdict(list)
    for o in outcomes:
        by_source[o.row["source"]].append(o)
    for source, group in sorted(by_source.items()):
        print(summary(source, group))
    print(f"  memory-infeasible (compared anyway): {sum(o.memory != 'fits' for o in outcomes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV, help="rows in the schema of training.csv")
    parser.add_argument("--out", type=Path, help="also write id, predicted, measured, error_pct as CSV")
    args = parser.parse_args()
    with args.data.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))

    outcomes, skipped = [], defaultdict(Counter)
    for row in rows:
        try:
            outcomes.append(evaluate(row))
        except (Skip, DseError) as exc:  # DseError: PlanError (invalid plan), CatalogError (unknown GPU)
            skipped[str(exc)][row["source"]] += 1
    print("error = predicted / measured - 1 (+ = the model is optimistic for throughput metrics)")
    print_rows(outcomes)
    print_summary("SUMMARY", outcomes)
    print(f"\nNot predicted: {sum(sum(c.values()) for c in skipped.values())} rows")
    for reason, by_source in sorted(skipped.items(), key=lambda kv: -sum(kv[1].values())):
        sources = ", ".join(f"{s} x{n}" for s, n in by_source.most_common())
        print(f"  {sum(by_source.values()):4d}  {reason}  [{sources}]")
    assumed = Counter(a for o in outcomes for a in o.assumptions)
    if assumed:
        print("Assumptions in predicted rows (rows affected):")
        for text, count in assumed.most_common():
            print(f"  {count:4d}  {text}")
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "predicted", "measured", "error_pct"])
            for o in outcomes:
                writer.writerow([o.row["id"], f"{o.predicted:.6g}", o.row["value"], f"{o.error_pct:.2f}"])
    mape = statistics.mean(abs(o.error_pct) for o in outcomes) if outcomes else float("nan")
    print(f"MAPE {mape:.1f}% over {len(outcomes)} rows")


if __name__ == "__main__":
    main()
