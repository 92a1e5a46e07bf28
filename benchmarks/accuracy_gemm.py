"""The GEMM model (simulators/hardware/_compute.py) against GEMM times measured with cuBLAS.

Why: micro-batch and tensor-parallel choices turn on how a GEMM's time grows with its rows; a
model that is right on average but wrong in the ratio time(m) / time(2m) ranks plans wrongly.
Data: Vidur's profiles of transformer linear layers (microsoft/vidur, data/profiling/compute/
{a100,h100}/<model>/mlp.csv: fp16 QKV, output, gate+up and down projections at tensor-parallel
degrees 1, 2, 4, 8 and token counts 1 to 4,096, median of CUDA-timed runs; the GEMM shapes as
dse/calibrate/vidur.py derives them). Prints per GPU the median signed error (model / measured
- 1; negative: the model is faster), the mean absolute error, Spearman's rank correlation of
achieved throughput over the shapes, the spread of log(model / measured) around its median (the
shape-dependent error, which a per-GPU efficiency cannot remove), and the error of the modelled
ratio time(m) / time(2m) for 256 <= m <= 2,048 rows (the step that decides a micro-batch choice).
The Azure AI-benchmarking-guide's cuBLASLt sweeps (benchmarks/data/azure_gemm.csv) follow.

    python benchmarks/accuracy_gemm.py                    # the checked-in extract (benchmarks/data/)
    python benchmarks/accuracy_gemm.py --vidur DIR        # every DIR/{a100,h100}/**/mlp.csv
    python benchmarks/accuracy_gemm.py --vidur DIR --extract benchmarks/data/vidur_gemm.csv

DIR is a checkout's data/profiling/compute. `--extract` rewrites the checked-in extract: the
six models profiled on both GPUs, at the token counts in EXTRACT_TOKENS.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from dse.calibrate.vidur import gemm_rows
from simulators.hardware import gemm_time_s, get_gpu
from simulators.serving import load_vidur_profile

EXTRACT = Path(__file__).parent / "data" / "vidur_gemm.csv"
AZURE = Path(__file__).parent / "data" / "azure_gemm.csv"  # square sweeps, cuBLASLt (data/README.md)
GPUS = {"a100": "A100-80GB", "h100": "H100-SXM"}  # Vidur's profiling GPUs (its README: A100 80GB, H100)
EXTRACT_MODELS = (
    "Qwen/Qwen-72B",
    "codellama/CodeLlama-34b-Instruct-hf",
    "internlm/internlm-20b",
    "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-2-7b-hf",
    "microsoft/phi-2",
)
# Powers of two, and the mid sizes whose doubling is also present (384 -> 768 -> 1536 -> 3072).
EXTRACT_TOKENS = frozenset([2**i for i in range(13)] + [384, 768, 1536, 2560, 3072, 3584])
RATIO_ROWS = (256, 2048)  # m range of the time(m) / time(2m) check
PRECISION = "fp16"


def vidur_rows(root: Path, tokens: frozenset[int] | None = None) -> list[dict[str, object]]:
    """Distinct GEMM shapes per GPU of every mlp.csv under root/{a100,h100}, optionally only
    the rows at `tokens` and of EXTRACT_MODELS."""
    rows = []
    for short, gpu in GPUS.items():
        for path in sorted((root / short).rglob("mlp.csv")):
            model = str(path.parent.relative_to(root / short))
            if tokens is not None and model not in EXTRACT_MODELS:
                continue
            profile = load_vidur_profile(mlp_csv=path).mlp
            for row in gemm_rows(profile, gpu, model):
                if tokens is None or int(row["m"]) in tokens:
                    rows.append(row)
    return _distinct_per_gpu(rows)


def _distinct_per_gpu(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One row per (gpu, m, n, k): two models can share a shape; their times are averaged."""
    merged: dict[tuple, list[dict[str, object]]] = {}
    for row in rows:
        merged.setdefault((row["gpu"], row["m"], row["n"], row["k"]), []).append(row)
    return [{**same[0], "time_s": float(np.mean([r["time_s"] for r in same]))} for same in merged.values()]


def write_extract(rows: list[dict[str, object]], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["gpu", "m", "n", "k", "time_us"])
        for r in sorted(rows, key=lambda r: (r["gpu"], r["n"], r["k"], r["m"])):
            writer.writerow([r["gpu"], r["m"], r["n"], r["k"], f"{r['time_s'] * 1e6:.4g}"])


def read_extract(path: Path) -> list[dict[str, object]]:
    with path.open(newline="", encoding="utf-8") as f:
        return [
            {**{c: int(r[c]) for c in "mnk"}, "gpu": r["gpu"], "time_s": float(r["time_us"]) * 1e-6}
            for r in csv.DictReader(f)
        ]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho (ranks by argsort; ties are negligible in measured times)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def gpu_report(gpu_name: str, rows: list[dict[str, object]]) -> dict[str, float]:
    gpu = get_gpu(gpu_name, "gpu")
    m, n, k = (np.array([r[c] for r in rows], dtype=float) for c in ("m", "n", "k"))
    measured = np.array([r["time_s"] for r in rows])
    modelled = gemm_time_s(gpu, m, n, k, 1, PRECISION)
    error = modelled / measured - 1
    flops = 2 * m * n * k
    by_shape = {(mi, ni, ki): i for i, (mi, ni, ki) in enumerate(zip(m, n, k))}
    ratio_err = [
        (modelled[i] / modelled[j]) / (measured[i] / measured[j]) - 1
        for (mi, ni, ki), i in by_shape.items()
        if RATIO_ROWS[0] <= mi <= RATIO_ROWS[1] and (j := by_shape.get((2 * mi, ni, ki))) is not None
    ]
    return {
        "n": len(rows),
        "median": float(np.median(error)),
        "mean_abs": float(np.mean(np.abs(error))),
        "mean_abs_256": float(np.mean(np.abs(error[m >= 256]))),
        "spearman": spearman(flops / modelled, flops / measured),
        "spread": float(np.mean(np.abs(np.log(modelled / measured) - np.median(np.log(modelled / measured))))),
        "ratio_n": len(ratio_err),
        "ratio_median": float(np.median(ratio_err)),
        "ratio_abs": float(np.mean(np.abs(ratio_err))),
    }


def azure_report() -> None:
    """The Azure cuBLASLt sweeps: model / measured - 1 per shape (a second source, other precisions)."""
    with AZURE.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    print("Azure AI-benchmarking-guide cuBLASLt sweeps (model / measured - 1):")
    for gpu_name in dict.fromkeys(r["gpu"] for r in rows):
        mine = [r for r in rows if r["gpu"] == gpu_name]
        m, n, k = (np.array([float(r[c]) for r in mine]) for c in "mnk")
        measured = 2 * m * n * k / (np.array([float(r["tflops"]) for r in mine]) * 1e12)
        error = gemm_time_s(get_gpu(gpu_name, "gpu"), m, n, k, 1, mine[0]["precision"]) / measured - 1
        shapes = " ".join(f"{int(a)}x{int(b)}x{int(c)} {e:+.0%}" for a, b, c, e in zip(m, n, k, error))
        print(f"  {gpu_name} {mine[0]['precision']}: mean |e| {np.mean(np.abs(error)):.1%}; {shapes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vidur", type=Path, help="Vidur's data/profiling/compute directory")
    parser.add_argument("--extract", type=Path, help="write the extract's rows here instead of reporting")
    args = parser.parse_args()
    if args.extract:
        if not args.vidur:
            parser.error("--extract needs --vidur")
        rows = vidur_rows(args.vidur, EXTRACT_TOKENS)
        write_extract(rows, args.extract)
        print(f"wrote {args.extract}: {len(rows)} GEMM shapes")
        return
    rows = vidur_rows(args.vidur) if args.vidur else read_extract(EXTRACT)
    print(
        f"{'gpu':10} {'shapes':>6} {'median e':>9} {'mean |e|':>9} {'|e| m>=256':>10} {'Spearman':>9} "
        f"{'spread':>7} {'t(m)/t(2m) n':>12} {'median':>7} {'mean |e|':>9}"
    )
    results = {}
    for gpu_name in GPUS.values():
        r = results[gpu_name] = gpu_report(gpu_name, [row for row in rows if row["gpu"] == gpu_name])
        print(
            f"{gpu_name:10} {r['n']:6d} {r['median']:+9.1%} {r['mean_abs']:9.1%} {r['mean_abs_256']:10.1%} "
            f"{r['spearman']:9.3f} {r['spread']:7.3f} {r['ratio_n']:12d} {r['ratio_median']:+7.1%} "
            f"{r['ratio_abs']:9.1%}"
        )
    azure_report()
    total = sum(r["n"] for r in results.values())
    mean_abs = sum(r["mean_abs"] * r["n"] for r in results.values()) / total
    h100, a100 = results["H100-SXM"], results["A100-80GB"]
    print(
        f"gemm: mean |e| {mean_abs:.1%} over {total} shapes (H100 {h100['mean_abs']:.1%}, A100 {a100['mean_abs']:.1%})"
    )


if __name__ == "__main__":
    main()
