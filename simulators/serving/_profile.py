"""Measured kernel times from Vidur profiles, in place of the roofline where they exist.

Vidur (microsoft/vidur) profiles one transformer layer on one tensor-parallel rank and writes
CSVs; `load_vidur_profile` reads them and `apply_profile` replaces the matching rows of a
`ReplicaCost` (simulators.serving._cost). Operations without a profile keep the analytical rows.

Files and columns, as read in microsoft/vidur (all times are the median over repetitions, in
milliseconds, `time_stats.<op>.median`; they are converted to seconds here):

- `data/profiling/compute/<gpu>/<model>/mlp.csv` (e.g. .../a100/meta-llama/Llama-2-70b-hf/mlp.csv;
  written by vidur/profiling/mlp/mlp_wrapper.py over the block of vidur/profiling/mlp/mlp_impl.py):
  per row `num_tokens`, `num_tensor_parallel_workers`, the model shape `n_head`, `n_kv_head`,
  `n_embd`, `n_expanded_embd` (FFN width), `vocab_size`, `use_gated_mlp`, and per operation
  `time_stats.<op>.{min,max,mean,median,std}` for emb, input_layernorm, attn_pre_proj (QKV GEMM),
  attn_rope, attn_post_proj (output GEMM), post_attention_layernorm, mlp_up_proj (gate+up GEMM),
  mlp_act, mlp_down_proj and add (the second residual add: the first one is not timed).
- `data/profiling/compute/<gpu>/<model>/attention.csv` (layout read in data/profiling/a100/attention.csv;
  written by vidur/profiling/attention/attention_wrapper.py, inputs from
  vidur/profiling/utils/__init__.py): `n_embd`, `n_q_head`, `n_kv_head` (whole model),
  `block_size`, `num_tensor_parallel_workers`, `max_model_len`, `batch_size`,
  `prefill_chunk_size`, `kv_cache_size` (tokens already cached per sequence), `is_prefill`,
  `attention_backend`, and `time_stats.attn_prefill.*` (prefill rows) / `time_stats.attn_decode.*`
  (decode rows, `prefill_chunk_size` 0); the other kind's cells are empty.
- `data/profiling/network/<node>/all_reduce.csv` (e.g. .../a100_dgx/all_reduce.csv; written by
  vidur/profiling/collectives/main.py and collectives_wrapper.py): a pandas index column with no
  name, `time_stats.all_reduce.*`, `rank`, `num_workers`, `size` (bytes: fp16 elements x 2),
  `collective`, `devices_per_node`, `max_devices_per_node`.

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

import csv
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulators._errors import SpecError
from simulators.models import ModelSpec
from simulators.serving._cost import ACTIVATION_BYTES, ReplicaCost

MS = 1e-3  # Vidur's times are milliseconds

MLP_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj", "mlp_act", "attn_rope")
MLP_OPTIONAL_OPS = ("input_layernorm", "post_attention_layernorm", "add")
MLP_SHAPE = {  # Vidur's column -> ModelSpec field
    "n_embd": "hidden",
    "n_head": "heads",
    "n_kv_head": "kv_heads",
    "n_expanded_embd": "ffn_hidden",
    "use_gated_mlp": "gated_mlp",
}
ATTENTION_SHAPE = {"n_embd": "hidden", "n_q_head": "heads", "n_kv_head": "kv_heads"}
PREFILL, DECODE, ALL_REDUCE = (f"time_stats.{op}.median" for op in ("attn_prefill", "attn_decode", "all_reduce"))

MLP_EXPECTED = (
    "num_tokens, num_tensor_parallel_workers, "
    + ", ".join(f"time_stats.{op}.median" for op in MLP_OPS)
    + " (optional: "
    + ", ".join(f"time_stats.{op}.median" for op in MLP_OPTIONAL_OPS)
    + ", "
    + ", ".join(MLP_SHAPE)
    + ")"
)
ATTENTION_EXPECTED = (
    f"num_tensor_parallel_workers, batch_size, prefill_chunk_size, kv_cache_size, {PREFILL} and/or {DECODE} "
    f"(optional: {', '.join(ATTENTION_SHAPE)}, block_size)"
)
ALL_REDUCE_EXPECTED = f"num_workers, size, {ALL_REDUCE} (optional: devices_per_node, collective)"


@dataclass(frozen=True, eq=False)
class MlpProfile:
    """mlp.csv: one entry per row; times in seconds."""

    source: str
    num_tokens: np.ndarray
    tp: np.ndarray
    op_s: dict[str, np.ndarray]  # per operation, MLP_OPS and MLP_OPTIONAL_OPS (0 where absent)
    shape: dict[str, np.ndarray] = field(default_factory=dict)  # the MLP_SHAPE columns the file has

    @property
    def layer_s(self) -> np.ndarray:
        """One layer's linear operations and memory-bound kernels per row."""
        return np.sum([self.op_s[op] for op in MLP_OPS + MLP_OPTIONAL_OPS], axis=0)


@dataclass(frozen=True, eq=False)
class AttentionProfile:
    """attention.csv: one entry per row; times in seconds, NaN where the row is of the other kind."""

    source: str
    tp: np.ndarray
    batch_size: np.ndarray
    prefill_chunk_size: np.ndarray
    kv_cache_size: np.ndarray
    prefill_s: np.ndarray
    decode_s: np.ndarray
    shape: dict[str, np.ndarray] = field(default_factory=dict)  # ATTENTION_SHAPE and block_size, if present


@dataclass(frozen=True, eq=False)
class AllReduceProfile:
    """all_reduce.csv, rows of other collectives dropped: message bytes and seconds."""

    source: str
    num_workers: np.ndarray
    size_bytes: np.ndarray
    time_s: np.ndarray
    devices_per_node: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class VidurProfile:
    """The parsed tables; None where no file was given."""

    mlp: MlpProfile | None = None
    attention: AttentionProfile | None = None
    all_reduce: AllReduceProfile | None = None


def load_vidur_profile(
    mlp_csv: str | Path | None = None,
    attention_csv: str | Path | None = None,
    all_reduce_csv: str | Path | None = None,
) -> VidurProfile:
    """Read Vidur's mlp.csv, attention.csv and all_reduce.csv (any of them); SpecError, one line
    naming the file, the line or column and the expected columns, when one is malformed."""
    return VidurProfile(
        mlp=_load_mlp(Path(mlp_csv)) if mlp_csv is not None else None,
        attention=_load_attention(Path(attention_csv)) if attention_csv is not None else None,
        all_reduce=_load_all_reduce(Path(all_reduce_csv)) if all_reduce_csv is not None else None,
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


class _Csv:
    """A CSV's header and rows, with the line number of each row for errors."""

    def __init__(self, path: Path, expected: str):
        self.path, self.expected = path, expected
        try:
            with path.open(newline="") as fh:
                reader = csv.reader(fh)
                rows, lines = [], []
                header = next(reader, None)
                for row in reader:
                    if not any(cell.strip() for cell in row):
                        continue
                    rows.append(row)
                    lines.append(reader.line_num)
        except OSError as err:
            raise SpecError(f"{path}: cannot read the profile ({err.strerror}); expected columns: {expected}") from None
        except (csv.Error, UnicodeDecodeError) as err:
            raise SpecError(f"{path}: not a CSV file ({err}); expected columns: {expected}") from None
        if header is None:
            raise SpecError(f"{path}: empty file; expected columns: {expected}")
        self.header = [h.strip() for h in header]
        self.index = {name: i for i, name in enumerate(self.header) if name}
        for row, line in zip(rows, lines):
            if len(row) != len(self.header):
                raise SpecError(
                    f"{path}: line {line} has {len(row)} fields, the header {len(self.header)}; "
                    f"expected columns: {expected}"
                )
        if not rows:
            raise SpecError(f"{path}: no data rows; expected columns: {expected}")
        self.rows, self.lines = rows, lines

    def has(self, name: str) -> bool:
        return name in self.index

    def require(self, *names: str) -> None:
        missing = [n for n in names if n not in self.index]
        if missing:
            raise SpecError(f"{self.path}: missing column(s) {', '.join(missing)}; expected columns: {self.expected}")

    def strings(self, name: str) -> list[str]:
        i = self.index[name]
        return [row[i].strip() for row in self.rows]

    def numbers(self, name: str, *, finite: bool = True, scale: float = 1.0) -> np.ndarray:
        """The column as float64; '' is NaN (refused if `finite`), True/False are 1/0."""
        out = np.empty(len(self.rows))
        for k, (cell, line) in enumerate(zip(self.strings(name), self.lines)):
            if cell in ("True", "true", "False", "false"):
                value = float(cell in ("True", "true"))
            elif cell == "" and not finite:
                value = np.nan
            else:
                try:
                    value = float(cell)
                except ValueError:
                    value = np.nan
                if not np.isfinite(value) or value < 0:
                    raise SpecError(
                        f"{self.path}: line {line}, column {name}: {cell!r} is not allowed; allowed: a number >= 0; "
                        f"expected columns: {self.expected}"
                    )
            out[k] = value
        return out * scale


def _load_mlp(path: Path) -> MlpProfile:
    f = _Csv(path, MLP_EXPECTED)
    f.require("num_tokens", "num_tensor_parallel_workers", *(f"time_stats.{op}.median" for op in MLP_OPS))
    op_s = {op: f.numbers(f"time_stats.{op}.median", scale=MS) for op in MLP_OPS}
    for op in MLP_OPTIONAL_OPS:
        col = f"time_stats.{op}.median"
        op_s[op] = np.nan_to_num(f.numbers(col, finite=False, scale=MS)) if f.has(col) else np.zeros(len(f.rows))
    return MlpProfile(
        source=str(path),
        num_tokens=f.numbers("num_tokens"),
        tp=f.numbers("num_tensor_parallel_workers"),
        op_s=op_s,
        shape={col: f.numbers(col) for col in MLP_SHAPE if f.has(col)},
    )


def _load_attention(path: Path) -> AttentionProfile:
    f = _Csv(path, ATTENTION_EXPECTED)
    f.require("num_tensor_parallel_workers", "batch_size", "prefill_chunk_size", "kv_cache_size")
    if not f.has(PREFILL) and not f.has(DECODE):
        f.require(PREFILL, DECODE)
    nan = np.full(len(f.rows), np.nan)
    return AttentionProfile(
        source=str(path),
        tp=f.numbers("num_tensor_parallel_workers"),
        batch_size=f.numbers("batch_size"),
        prefill_chunk_size=f.numbers("prefill_chunk_size"),
        kv_cache_size=f.numbers("kv_cache_size"),
        prefill_s=f.numbers(PREFILL, finite=False, scale=MS) if f.has(PREFILL) else nan,
        decode_s=f.numbers(DECODE, finite=False, scale=MS) if f.has(DECODE) else nan,
        shape={col: f.numbers(col) for col in (*ATTENTION_SHAPE, "block_size") if f.has(col)},
    )


def _load_all_reduce(path: Path) -> AllReduceProfile:
    f = _Csv(path, ALL_REDUCE_EXPECTED)
    f.require("num_workers", "size", ALL_REDUCE)
    keep = np.ones(len(f.rows), bool)
    if f.has("collective"):
        keep = np.array([c == "all_reduce" for c in f.strings("collective")])
        if not keep.any():
            raise SpecError(f"{path}: no row has collective all_reduce; expected columns: {ALL_REDUCE_EXPECTED}")
    size, time_s = f.numbers("size"), f.numbers(ALL_REDUCE, scale=MS)
    for name, col in (("size", size), (ALL_REDUCE, time_s)):
        bad = np.flatnonzero(keep & (col <= 0))
        if bad.size:
            raise SpecError(
                f"{path}: line {f.lines[bad[0]]}, column {name}: 0 is not allowed; allowed: a number > 0 "
                f"(sizes and times are interpolated in log-log); expected columns: {ALL_REDUCE_EXPECTED}"
            )
    return AllReduceProfile(
        source=str(path),
        num_workers=f.numbers("num_workers")[keep],
        size_bytes=size[keep],
        time_s=time_s[keep],
        devices_per_node=f.numbers("devices_per_node")[keep] if f.has("devices_per_node") else None,
    )
