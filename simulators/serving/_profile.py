"""Measured kernel times from Vidur profiles, in place of the roofline where they exist.

Vidur (microsoft/vidur) profiles one transformer layer on one tensor-parallel rank and writes
CSVs; `load_vidur_profile` (simulators.serving._profile_files, which documents the columns) reads
them and `apply_profile` replaces the matching rows of a `ReplicaCost` (simulators.serving._cost).
Operations without a profile keep the analytical rows.

How they replace the rows (vidur/execution_time_predictor/sklearn_execution_time_predictor.py and
vidur/entities/execution_time.py show how Vidur combines the same columns):

- `linear_s[T]`: the sum of attn_pre_proj, attn_post_proj, mlp_up_proj, mlp_down_proj, mlp_act,
  attn_rope, input_layernorm, post_attention_layernorm and add (the last three count 0 where the
  column is missing or empty, as Vidur does); emb is not per layer and is left out. Rows match
  `num_tensor_parallel_workers == tp` and, where the columns exist, n_embd, n_head, n_kv_head,
  n_expanded_embd and use_gated_mlp of the model. vocab_size is not matched: Vidur pads it (32768
  for Llama-2's 32000) and it only affects emb.
- `prefill_attention_s[c]`: prefill rows (prefill_chunk_size c > 0) with kv_cache_size 0 and
  batch_size 1; chunked rows with a cache are not used (the engine scales the c-token time by
  1 + 2p/c for p cached tokens). Rows match tp, n_embd, n_q_head, n_kv_head and, when some row has
  it, block_size == the cost's block_tokens (otherwise every block size is used).
- decode attention: a least-squares line of time against batch_size x kv_cache_size over the
  decode rows of the same match, since the engine prices a decode batch as fixed + per cached
  token over all its sequences. A negative intercept is refitted through the origin; a negative
  slope is an error.
- `allreduce_s[T]`: two all-reduces of T x hidden x 2 bytes (fp16/bf16 activations) per layer, from
  rows with collective all_reduce (when the column exists), num_workers == tp and, when the column
  exists, devices_per_node == tp (one node, as Vidur's predictor selects). Unused when tp == 1.
  Vidur's configured NCCL CPU launch and skew overheads are not in the CSV and not added.

Interpolation: rows measured at the same point are averaged. Between measured points linear in
tokens (linear_s, prefill) or log-log in bytes (all-reduce); below the smallest measured point
the smallest point's time (small kernels are launch- and weight-read-bound, so flat); above the
largest, its time scaled by x / x_max (linear work: GEMMs, kernels, all-reduce bandwidth) or
(c / c_max)^2 for self-attention, the same extrapolation the engine's `_lookup` applies past a
table's end. Index 0 takes the value at 1, as `replica_cost` does.

Measured times replace the analytical rows as they are: `replica_cost` divides its compute rows
by `compute_fraction` (the share of the roofline real kernels reach), and a measured kernel
already runs at the rate it reached, so replacing the whole row drops that scaling for the
operations measured and keeps it for the rest.

Not used: attention.csv's attn_kv_cache_save (the analytical model prices no KV write either),
attn_input_reshape / attn_output_reshape, Vidur's attention batching-overhead fractions (a
config, not data), send_recv.csv and cpu_overheads.csv.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from simulators._errors import SpecError
from simulators.models import ModelSpec
from simulators.serving._cost import ACTIVATION_BYTES, ReplicaCost
from simulators.serving._profile_files import (
    ATTENTION_SHAPE,
    DECODE,
    MLP_SHAPE,
    PREFILL,
    AllReduceProfile,
    AttentionProfile,
    VidurProfile,
)


def apply_profile(cost: ReplicaCost, profile: VidurProfile, model: ModelSpec, tp: int) -> ReplicaCost:
    """`cost` with the measured operations of `profile` in place of its analytical rows (module
    docstring: which rows, which profile rows, how they are interpolated)."""
    if tp != cost.tp:
        raise SpecError(f"apply_profile: tp={tp} differs from the cost's tp={cost.tp}; allowed: {cost.tp}")
    changes = {}
    tokens = np.maximum(np.arange(len(cost.linear_s)), 1).astype(float)
    if profile.mlp is not None:
        p = profile.mlp
        keep = _match(p.source, p.tp, tp, p.shape, MLP_SHAPE, model, "num_tensor_parallel_workers")
        x, y = _mean_by(p.num_tokens[keep], p.layer_s[keep])
        changes["linear_s"] = _interp(tokens, x, y, power=1.0)
    if profile.attention is not None:
        changes |= _attention_rows(cost, profile.attention, model, tp)
    if profile.all_reduce is not None and tp > 1:
        p = profile.all_reduce
        keep = p.num_workers == tp
        if p.devices_per_node is not None:
            keep &= p.devices_per_node == tp
        if not keep.any():
            raise SpecError(f"{p.source}: no all_reduce rows with num_workers={tp}{_dpn(p, tp)}; {_has_workers(p)}")
        x, y = _mean_by(p.size_bytes[keep], p.time_s[keep])
        changes["allreduce_s"] = 2.0 * _interp_loglog(tokens * model.hidden * ACTIVATION_BYTES, x, y)
    return dataclasses.replace(cost, **changes)


def _attention_rows(cost: ReplicaCost, p: AttentionProfile, model: ModelSpec, tp: int) -> dict:
    keep = _match(p.source, p.tp, tp, p.shape, ATTENTION_SHAPE, model, "num_tensor_parallel_workers")
    block = p.shape.get("block_size")
    if block is not None and (keep & (block == cost.block_tokens)).any():
        keep &= block == cost.block_tokens
    prefill = keep & (p.prefill_chunk_size > 0) & (p.kv_cache_size == 0) & (p.batch_size == 1)
    prefill &= np.isfinite(p.prefill_s)
    decode = keep & (p.prefill_chunk_size == 0) & np.isfinite(p.decode_s)
    if not prefill.any() and not decode.any():
        raise SpecError(
            f"{p.source}: rows match tp={tp} but none is a prefill (prefill_chunk_size > 0, kv_cache_size 0, "
            f"batch_size 1, {PREFILL} set) or a decode (prefill_chunk_size 0, {DECODE} set)"
        )
    out = {}
    if prefill.any():
        chunks = np.maximum(np.arange(len(cost.prefill_attention_s)), 1).astype(float)
        x, y = _mean_by(p.prefill_chunk_size[prefill], p.prefill_s[prefill])
        out["prefill_attention_s"] = _interp(chunks, x, y, power=2.0)
    if decode.any():
        fixed, per_token = _decode_line(p, p.batch_size[decode] * p.kv_cache_size[decode], p.decode_s[decode])
        out["decode_attention_fixed_s"] = fixed
        out["decode_attention_per_token_s"] = per_token
    return out


def _decode_line(p: AttentionProfile, cached: np.ndarray, time_s: np.ndarray) -> tuple[float, float]:
    if len(np.unique(cached)) < 2:
        raise SpecError(
            f"{p.source}: the decode rows cover one batch_size x kv_cache_size ({cached[0]:g}); "
            "a fixed + per-token line needs at least two"
        )
    design = np.column_stack([np.ones_like(cached), cached])
    (fixed, per_token), *_ = np.linalg.lstsq(design, time_s, rcond=None)
    if fixed < 0:
        fixed, per_token = 0.0, float(cached @ time_s / (cached @ cached))
    if per_token < 0:
        raise SpecError(
            f"{p.source}: decode time falls with batch_size x kv_cache_size "
            f"(slope {per_token:.3g} s per token); allowed: times that grow with the cache"
        )
    return float(fixed), float(per_token)


def _match(source, tp_col, tp, shape, fields, model, tp_name) -> np.ndarray:
    """Rows of tensor-parallel degree `tp` and of the model's shape (for the shape columns present)."""
    keep = tp_col == tp
    wanted = {col: float(getattr(model, name)) for col, name in fields.items() if col in shape}
    for col, value in wanted.items():
        keep &= shape[col] == value
    if keep.any():
        return keep
    cols = [tp_name, *wanted]
    table = np.column_stack([tp_col, *(shape[c] for c in wanted)])
    have = np.unique(table, axis=0)
    listed = "; ".join(" ".join(f"{c}={v:g}" for c, v in zip(cols, row)) for row in have[:8])
    more = f"; and {len(have) - 8} more" if len(have) > 8 else ""
    want = " ".join(f"{c}={v:g}" for c, v in zip(cols, [float(tp), *wanted.values()]))
    raise SpecError(f"{source}: no rows with {want} ({model.name}); the file has: {listed}{more}")


def _dpn(p: AllReduceProfile, tp: int) -> str:
    return f" and devices_per_node={tp}" if p.devices_per_node is not None else ""


def _has_workers(p: AllReduceProfile) -> str:
    if p.devices_per_node is None:
        pairs = sorted({f"num_workers={w:g}" for w in p.num_workers})
    else:
        pairs = sorted({f"num_workers={w:g} devices_per_node={d:g}" for w, d in zip(p.num_workers, p.devices_per_node)})
    return "the file has: " + ("; ".join(pairs) if pairs else "no all_reduce rows")


def _mean_by(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct x ascending, with the mean y of the rows at each."""
    xs, inverse = np.unique(x, return_inverse=True)
    return xs, np.bincount(inverse, weights=y) / np.bincount(inverse)


def _interp(at: np.ndarray, x: np.ndarray, y: np.ndarray, power: float) -> np.ndarray:
    """Linear between measured points, flat below the first, y_max * (at / x_max)**power above."""
    inside = np.interp(at, x, y)
    return np.where(at > x[-1], y[-1] * (at / x[-1]) ** power, inside).astype(np.float64)


def _interp_loglog(at: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Log-log between measured sizes, flat below the smallest, proportional above the largest."""
    inside = np.exp(np.interp(np.log(at), np.log(x), np.log(y)))
    return np.where(at > x[-1], y[-1] * at / x[-1], inside).astype(np.float64)


# ---------------------------------------------------------------- CSV reading
