"""Accuracy of the serving simulator against published inference throughput.

Why: before a serving study ranks deployments, we need to know how far the simulator is from
real engines. This replays every row of ../shared/validation/serving.csv (see its README) it
can: offline rows (all requests submitted at once, fixed lengths) as a backlog served with
in-flight batching (chunked prefill with TensorRT-LLM's default token budget of 8,192), static
rows as one static batch of `concurrency` requests; it prints predicted vs measured output
tokens/s per row, the error (predicted / measured - 1), a summary per source and the line
`MAPE <x>% over <n> rows`. Nothing is fitted: the compute model and its one constant
(simulators/hardware/fitted.yaml) are those of training.

    python benchmarks/accuracy_serving.py [--data PATH] [--out results.csv] [--requests N]
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
from simulators.serving import Deployment, Pool, Requests, simulate_deployment

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "../shared/validation/serving.csv").resolve()
# Published model names to zoo entries of the same architecture (Llama 3.1 and 3.3 keep Llama 3's).
MODELS = {
    "llama-3.3-70b-instruct": "llama3-70b",
    "llama-3-70b": "llama3-70b",
    "llama-3.1-405b": "llama3-405b",
    "llama-3.1-8b": "llama3-8b",
}
INFLIGHT_TOKEN_BUDGET = 8192  # TensorRT-LLM's default max_num_tokens
INFLIGHT_MAX_REQUESTS = 2048  # TensorRT-LLM's largest default max_batch_size; KV capacity binds first


class Skip(Exception):
    """The row cannot be represented; the message is the grouped reason."""


def _model(name: str):
    key = name.lower().removesuffix("-fp8")
    for published, zoo in MODELS.items():
        if key.startswith(published):
            return get_model(zoo)
    raise Skip(f"model not in the zoo: {name}")


def predict(row: dict[str, str], offline_requests: int) -> float:
    """Output tokens per second the simulator predicts for the row's deployment and load."""
    if row["metric"] != "throughput_tokens_per_s":
        raise Skip(f"metric {row['metric']}")
    gpu = get_gpu(row["gpu"])
    tp, pp = int(row["tp"] or 1), int(row["pp"] or 1)
    if tp * pp != int(row["num_gpus"]):
        raise Skip("tp*pp differs from num_gpus (several replicas)")
    precision = row["precision"] or ("fp16" if gpu.peak_tflops("bf16") is None else "bf16")
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
            "sarathi", tp=tp, pp=pp, max_batch_requests=INFLIGHT_MAX_REQUESTS, max_batch_tokens=INFLIGHT_TOKEN_BUDGET
        )
    else:
        raise Skip("closed-loop or open-loop load")
    # FP8 rows run NVIDIA ModelOpt FP8 checkpoints, which quantise the KV cache to FP8 as well
    # (their hf_quant_config: kv_cache_quant_algo FP8); TensorRT-LLM keeps it so.
    kv = "fp8" if precision == "fp8" else "bf16"
    deployment = Deployment(
        _model(row["model"]),
        gpu,
        pool,
        precision=precision,
        kv_precision=kv,
        compute_fraction=sustained_compute_fraction(),
    )
    requests = Requests(np.zeros(n), np.full(n, prompt), np.full(n, output))
    return simulate_deployment(deployment, requests).metrics["throughput_tok_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--out", type=Path, default=None, help="write id, predicted, measured, error_pct")
    parser.add_argument("--requests", type=int, default=2000, help="requests per offline row")
    args = parser.parse_args()
    rows = list(csv.DictReader(args.data.open()))
    results, skipped = [], Counter()
    print("Error = predicted / measured - 1 (+ = the model is optimistic)")
    print(f"{'id':34} {'gpu':9} {'tp':>2} {'in':>6} {'out':>5} {'measured':>9} {'predicted':>9} {'error':>7}")
    for row in rows:
        try:
            predicted = predict(row, args.requests)
        except (Skip, DseError) as exc:
            skipped[str(exc)] += 1
            continue
        measured = float(row["value"])
        error = (predicted / measured - 1) * 100
        results.append((row, predicted, measured, error))
        print(
            f"{row['id']:34} {row['gpu']:9} {row['tp']:>2} {row['input_len']:>6} {row['output_len']:>5} "
            f"{measured:9.4g} {predicted:9.4g} {error:+6.1f}%"
        )
    by_source = defaultdict(list)
    for row, _, _, error in results:
        by_source[row["source"]].append(error)
    print("\nSUMMARY")
    for source, errors in [("all rows", [e for *_, e in results]), *by_source.items()]:
        magnitudes = [abs(e) for e in errors]
        print(
            f"  {source:40} n={len(errors):3}  median|e|={statistics.median(magnitudes):5.1f}%  "
            f"max|e|={max(magnitudes):5.1f}%  bias={statistics.mean(errors):+5.1f}%"
        )
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
