"""Reading Vidur's profile CSVs into tables (simulators.serving._profile applies them).

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
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from simulators._errors import SpecError

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
