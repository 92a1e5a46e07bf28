"""Accuracy of the serving simulator against published inference throughput.

Why: before a serving study ranks deployments, we need to know how far the simulator is from
real engines. This replays every row of ../shared/validation/serving.csv (see its README) it
can: offline rows (all requests submitted at once, fixed lengths) as a backlog served with
in-flight batching (chunked prefill with TensorRT-LLM's default token budget of 8,192 and its
default capacity policy: a request starts when its prompt + output fit the KV cache), static
rows as one static batch of `concurrency` requests, MLPerf Server rows (open loop at `qps`, several
replicas, lengths from a data set) as in benchmarks/_server_rows.py; it prints predicted vs
measured per row, the error (predicted / measured - 1), summaries per metric and per source, the
MLPerf TTFT and ITL (TPOT) averages apart, and the line `MAPE <x>% over <n> rows`. Nothing is
fitted: the compute model and its one constant (simulators/hardware/fitted.yaml) are those of
training.

    python benchmarks/accuracy_serving.py [--data PATH] [--out results.csv] [--requests N] [--server-seconds S]
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from simulators import DseError
from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import get_model
from simulators.serving import Deployment, Pool, Requests, get_dataset, simulate_deployment

try:  # run as a script (benchmarks/ on sys.path) or imported as benchmarks.accuracy_serving
    from _server_rows import SERVER_METRICS, SERVER_SECONDS, server_metrics, server_run
except ModuleNotFoundError:
    from benchmarks._server_rows import SERVER_METRICS, SERVER_SECONDS, server_metrics, server_run

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "../shared/validation/serving.csv").resolve()
# Published model names to zoo entries of the same architecture (Llama 3.1 and 3.3 keep Llama 3's).
MODELS = {
    "llama-3.3-70b-instruct": "llama3-70b",
    "llama-3-70b": "llama3-70b",
    "llama-3.1-405b": "llama3-405b",
    "llama-3.1-8b": "llama3-8b",
    "llama-2-70b": "llama2-70b",
    "mixtral-8x7b": "mixtral-8x7b",
}
INFLIGHT_TOKEN_BUDGET = 8192  # TensorRT-LLM's default max_num_tokens
# TensorRT-LLM's default capacity policy, GUARANTEED_NO_EVICT (simulators/serving/_schedulers.py): the
# perf-overview runs set only CUDA graphs and the KV-cache fraction (docs/source/performance/perf-overview.md,
# llm_options.yml), and trtllm-bench gives every request its exact output length, so reserving prompt +
# output at admission is what the engine does.
INFLIGHT_SCHEDULER = "trtllm_no_evict"
INFLIGHT_MAX_REQUESTS = 2048  # TensorRT-LLM's largest default max_batch_size; KV capacity binds first


class Skip(Exception):
    """The row cannot be represented; the message is the grouped reason."""


def _zoo_name(name: str) -> str:
    key = name.lower().removesuffix("-fp8")
    for published, zoo in MODELS.items():
        if key.startswith(published):
            return zoo
    raise Skip(f"model not in the zoo: {name}")


def _model(name: str):
    return get_model(_zoo_name(name))


def _precision(row: dict[str, str]) -> str:
    """The row's precision. Blank (not published): fp8 where the notes say the weights were
    quantized (the B200 MLPerf run: "weight_transformations 'quantization'"; fp8 is what the same
    harness runs on H100 and H200), else bf16 where the GPU has it, else fp16."""
    if row["precision"]:
        return row["precision"]
    if "'quantization" in row["notes"]:
        return "fp8"
    return "fp16" if get_gpu(row["gpu"]).peak_tflops("bf16") is None else "bf16"


def predict(
    row: dict[str, str], offline_requests: int, server_seconds: float = SERVER_SECONDS, assume_bounds: bool = False
) -> float:
    """The row's metric as the simulator predicts it for the row's deployment and load. A Server
    row whose data set publishes only bounds for a side's lengths is not predicted unless
    `assume_bounds` (a replay then rests on lengths uniform on the bounds, not on the set's)."""
    if row["qps"]:
        if row["metric"] not in SERVER_METRICS:
            raise Skip(f"metric {row['metric']}")
        dataset = get_dataset(row["dataset"])
        if dataset.bounds_only and not assume_bounds:
            sides = " and ".join(dataset.bounds_only)
            raise Skip(
                f"{dataset.name}: only bounds of its {sides} lengths are published (datasets.yaml); "
                "--assume-bounds replays it on lengths uniform on them"
            )
        run = server_run(row, _zoo_name(row["model"]), _precision(row))
        return server_metrics(run, server_seconds)[row["metric"]]
    if row["metric"] != "throughput_tokens_per_s":
        raise Skip(f"metric {row['metric']}")
    gpu = get_gpu(row["gpu"])
    tp, pp = int(row["tp"] or 1), int(row["pp"] or 1)
    if tp * pp != int(row["num_gpus"]):
        raise Skip("tp*pp differs from num_gpus (several replicas)")
    precision = _precision(row)
    if not row["input_len"] or not row["output_len"]:
        raise Skip(f"request lengths follow a dataset ({row['dataset']}) whose lengths are not shipped")
    prompt, output = int(row["input_len"]), int(row["output_len"])
    static = row["scheduler"].startswith("static")
    if static:
        n = int(row["concurrency"])
        pool = Pool("static", tp=tp, pp=pp, max_batch_requests=n, max_batch_tokens=n * prompt)
    elif not row["concurrency"] and not row["qps"]:
        n = offline_requests
        pool = Pool(
            INFLIGHT_SCHEDULER,
            tp=tp,
            pp=pp,
            max_batch_requests=INFLIGHT_MAX_REQUESTS,
            max_batch_tokens=INFLIGHT_TOKEN_BUDGET,
        )
    else:
        raise Skip("closed-loop load")
    # FP8 rows run NVIDIA ModelOpt FP8 checkpoints, which quantise the KV cache to FP8 as well
    # (their hf_quant_config: kv_cache_quant_algo FP8); TensorRT-LLM keeps it so.
    kv = "fp8" if precision == "fp8" else "bf16"
    deployment = Deployment(
        _model(row["model"]),
        gpu,
        pool,
        precision=precision,
        kv_precision=kv,
        compute_fraction=sustained_compute_fraction(gpu),
    )
    requests = Requests(np.zeros(n), np.full(n, prompt), np.full(n, output))
    return simulate_deployment(deployment, requests).metrics["throughput_tok_s"]


def _summary(label: str, errors: list[float]) -> None:
    magnitudes = [abs(e) for e in errors]
    print(
        f"  {label:40} n={len(errors):3}  mean|e|={statistics.mean(magnitudes):5.1f}%  "
        f"median|e|={statistics.median(magnitudes):5.1f}%  max|e|={max(magnitudes):5.1f}%  "
        f"bias={statistics.mean(errors):+5.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--out", type=Path, default=None, help="write id, predicted, measured, error_pct")
    parser.add_argument("--requests", type=int, default=2000, help="requests per offline row")
    parser.add_argument(
        "--server-seconds", type=float, default=SERVER_SECONDS, help="seconds of Poisson arrivals per Server run"
    )
    parser.add_argument(
        "--assume-bounds",
        action="store_true",
        help="replay Server rows whose data set publishes only length bounds, on lengths uniform on them",
    )
    args = parser.parse_args()
    rows = list(csv.DictReader(args.data.open()))
    results, skipped, datasets = [], Counter(), {}
    print("Error = predicted / measured - 1 (+ = the model is optimistic)")
    print(f"{'id':38} {'gpu':9} {'tp':>2} {'in':>6} {'out':>5} {'measured':>9} {'predicted':>9} {'error':>7}")
    for row in rows:
        try:
            predicted = predict(row, args.requests, args.server_seconds, args.assume_bounds)
        except (Skip, DseError) as exc:
            skipped[str(exc)] += 1
            continue
        if row["qps"]:
            dataset = get_dataset(row["dataset"])
            datasets[dataset.name] = dataset
        measured = float(row["value"])
        error = (predicted / measured - 1) * 100
        results.append((row, predicted, measured, error))
        print(
            f"{row['id']:38} {row['gpu']:9} {row['tp']:>2} {row['input_len']:>6} {row['output_len']:>5} "
            f"{measured:9.4g} {predicted:9.4g} {error:+6.1f}%"
        )
    by_source, by_metric = defaultdict(list), defaultdict(list)
    for row, _, _, error in results:
        by_source[row["source"]].append(error)
        by_metric[row["metric"]].append(error)
    print("\nSUMMARY")
    _summary("all rows", [e for *_, e in results])
    for source, errors in by_source.items():
        _summary(source, errors)
    fixed = [(row, e) for row, _, _, e in results if row["input_len"] and row["output_len"]]
    for label, heavy in (("decode-heavy (output >= input)", True), ("prefill-heavy (output < input)", False)):
        errors = [e for row, e in fixed if (int(row["output_len"]) >= int(row["input_len"])) == heavy]
        if errors:
            _summary(label, errors)
    print("per metric")
    for metric, errors in by_metric.items():
        _summary(metric, errors)
    server = [(row["metric"], e) for row, _, _, e in results if row["qps"]]
    for metric, name in (("ttft_ms_avg", "MLPerf TTFT avg"), ("itl_ms_avg", "MLPerf ITL avg (per-request TPOT)")):
        errors = [e for m, e in server if m == metric]
        if errors:
            print(
                f"{name}: mean|e| {statistics.mean(abs(e) for e in errors):.1f}%, "
                f"bias {statistics.mean(errors):+.1f}% over {len(errors)} runs (target: within 15 %)"
            )
    for dataset in datasets.values():
        print(f"Assumed lengths, {dataset.name}: {dataset.assumption}")
    if skipped:
        print(f"Not predicted: {sum(skipped.values())} rows")
        for reason, count in skipped.most_common():
            print(f"  {count:3}  {reason}")
    if args.out:
        with args.out.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "predicted", "measured", "error_pct"])
            for row, predicted, measured, error in results:
                writer.writerow([row["id"], f"{predicted:.6g}", f"{measured:.6g}", f"{error:.2f}"])
    print(f"MAPE {statistics.mean(abs(e) for *_, e in results):.1f}% over {len(results)} rows")


if __name__ == "__main__":
    main()
