"""Vidur's MLP profile (mlp.csv) as a kernel calibration table (hardware.calibration).

Why: Vidur (microsoft/vidur) ships GEMM times measured on A100s and H100s for many models; each
row times one transformer block's four linear layers at a token count and tensor-parallel
degree, which are GEMMs of known shapes (vidur/profiling/mlp/mlp_impl.py, fp16: mlp_wrapper.py
casts the block to torch.float16):
- attn_pre_proj, the fused QKV projection: m = tokens, n = (heads + 2 kv_heads) head_dim / tp,
  k = hidden;
- attn_post_proj, the output projection: m = tokens, n = hidden, k = heads head_dim / tp;
- mlp_up_proj, gate and up fused for a gated MLP: m = tokens, n = (2 if gated) ffn / tp, k = hidden;
- mlp_down_proj: m = tokens, n = hidden, k = ffn / tp.
Each becomes one `gemm` row of the calibration format (simulators/hardware/calibration/README.md)
with the median time. The profile's memory-bound kernels (norms, RoPE, the activation) are not
converted: their bytes depend on kernels Vidur does not name.
"""

from __future__ import annotations

import csv
from pathlib import Path

from dse.errors import SpecError
from simulators.hardware.calibration._table import COLUMNS
from simulators.serving._profile_files import MlpProfile

VIDUR_PRECISION = "fp16"
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
SHAPE_COLUMNS = ("n_embd", "n_head", "n_kv_head", "n_expanded_embd", "use_gated_mlp")


def gemm_rows(profile: MlpProfile, gpu: str, source: str, powers_of_two: bool = False) -> list[dict[str, object]]:
    """Calibration rows for every GEMM of every profile row (`powers_of_two`: only rows whose
    token count is a power of two, for a compact table)."""
    missing = [c for c in SHAPE_COLUMNS if c not in profile.shape]
    if missing:
        raise SpecError(
            f"{profile.source}: lacks the model shape columns {', '.join(missing)}; Vidur's mlp.csv has them"
        )
    rows = []
    for i, (tokens, tp) in enumerate(zip(profile.num_tokens.tolist(), profile.tp.tolist())):
        tokens, tp = int(tokens), int(tp)
        if powers_of_two and tokens & (tokens - 1):
            continue
        hidden, heads, kv_heads, ffn = (int(profile.shape[c][i]) for c in SHAPE_COLUMNS[:4])
        gated = bool(profile.shape["use_gated_mlp"][i])
        head_dim = hidden // heads
        shapes = {
            "attn_pre_proj": ((heads + 2 * kv_heads) * head_dim // tp, hidden),
            "attn_post_proj": (hidden, heads * head_dim // tp),
            "mlp_up_proj": ((2 if gated else 1) * ffn // tp, hidden),
            "mlp_down_proj": (hidden, ffn // tp),
        }
        for op in GEMMS:
            n, k = shapes[op]
            rows.append(
                {
                    "gpu": gpu,
                    "op": "gemm",
                    "precision": VIDUR_PRECISION,
                    "m": tokens,
                    "n": n,
                    "k": k,
                    "batch": 1,
                    "time_s": float(profile.op_s[op][i]),
                    "source": f"{source} {op} tp {tp}",
                }
            )
    return _distinct(rows)


def _distinct(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """One row per GEMM shape: a profile can time one token count twice, and two layers of one
    block can share a shape (a square output projection and a QKV without GQA at the same tp);
    their times are then averaged."""
    merged: dict[tuple, list[dict[str, object]]] = {}
    for row in rows:
        merged.setdefault((row["m"], row["n"], row["k"]), []).append(row)
    out = []
    for same in merged.values():
        first = dict(same[0])
        first["time_s"] = sum(r["time_s"] for r in same) / len(same)
        first["source"] = " + ".join(dict.fromkeys(str(r["source"]) for r in same))
        out.append(first)
    return out


def write_table(rows: list[dict[str, object]], path: Path) -> None:
    """The rows as a calibration CSV (every column of the format; blank where not applicable)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        for row in rows:  # 6 significant digits: the profile's ms carry 3 decimals at best
            writer.writerow({**row, "time_s": f"{row['time_s']:.6g}"})
