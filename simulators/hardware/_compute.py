"""Time of one compute kernel on one GPU: GEMM, fused attention and memory-bound passes.

Why: a single best-shape efficiency per GPU (`gemm_efficiency`) times every GEMM as if it were
large and well shaped, and ignores attention kernels and memory-bound work, which left the first
training model ~30% optimistic. Each function here is a roofline over the GPU's dense peak and
its HBM bandwidth with the size effects that real kernels show, plus a fixed cost per launch:

- GEMM: output tiles are spread over the SMs in waves (a partly filled last wave costs a full
  one), each tile runs ceil(k / k_tile) mainloop iterations plus a fixed pipeline fill and drain
  (FILL_ITERATIONS; split over idle SMs when there are fewer tiles than SMs, as split-K and
  stream-K kernels do), and the per-SM rate is the measured large-GEMM fraction of the peak
  (`GpuSpec.gemm_efficiency_for`), so large, well-shaped GEMMs reproduce flops / (peak x
  gemm_efficiency) within a few per cent. Memory time is (m*k + k*n) * input bytes + m*n *
  output bytes per batch over the measured streaming bandwidth; the slower of the two wins.
- Attention (FlashAttention-2/3/4 style, `kernel="flash"`): forward FLOPs 4*b*h*s_q*s_kv*d, only
  the unmasked part for causal, backward 2.5x forward (5 matmuls against 2, the backward
  recomputes Q K^T: Tri Dao, flash-attention issue #1525; the same factor as the library's
  benchmarks/benchmark_flash_attention.py), at the measured fraction of the peak with the same
  wave and pipeline-fill effects over 128-row blocks. `kernel="unfused"` composes batched GEMMs
  and a softmax pass, as Megatron-LM ran attention before FlashAttention.
- Elementwise: bytes moved over the measured streaming bandwidth.

All shape arguments accept numpy arrays and broadcast against each other (the training model
scores thousands of candidates at once); scalar inputs give a float. Units: seconds, bytes.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from simulators._errors import SpecError
from simulators.hardware._gpu import GpuSpec
from simulators.hardware.calibration import CalibrationTable

# Fixed cost of one kernel: the GPU-side gap between queued launches plus the kernel's ramp-up.
# NVIDIA, "Getting Started with CUDA Graphs" (developer.nvidia.com/blog/cuda-graphs, 2019, V100):
# a 2.9 us kernel took 3.8 us per launch with launches queued on a stream (as recalled, not
# re-read here); the smallest shapes (1024^3) of the Azure AI-benchmarking-guide cuBLASLt sweep
# (A100 fp16, H100/H200/GB200 fp8) leave about 2 us that the tile model does not explain.
LAUNCH_OVERHEAD_S = 2e-6
MIN_TILE_M = 16  # rows of the smallest tensor-core instruction (mma m16n8k16, Ampere and later)
INPUT_BYTES = {"fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "fp4": 0.5}
OUTPUT_BYTES = 2.0  # GEMMs write 16-bit results; Transformer Engine's fp8 GEMMs write bf16
ACTIVATION_BYTES = 2.0  # bf16/fp16 activations, as attention reads and writes them
FLASH_BWD_FLOPS = 2.5  # backward / forward FLOPs of a FlashAttention kernel (see module docstring)
FLASH_BWD_KERNELS = 3  # FA2/FA3 backward: a dot(O, dO) preprocess, the main kernel, a dQ conversion


# Tiles are GPU fields (gemm_tile_m, gemm_tile_n, gemm_k_tile_bytes in gpus.yaml, with their
# sources: CUTLASS's 128x128 tiles with 128-byte K steps on NVIDIA, hipBLASLt's MT256x256x64 on
# MI300X). cuBLAS picks among several tiles per shape; one tile per GPU keeps the wave staircase
# of ml-engineering's "tile and wave quantization" section (training/performance/README.md)
# without guessing its heuristics.
# FILL_ITERATIONS = 3: the prologue of a multistage mainloop fills its shared-memory pipeline
# before the first MMA and the epilogue drains the tile. 3 minimises the error against the Azure
# AI-benchmarking-guide cuBLASLt sweeps (1024^3 to 32768^3 and three odd shapes on A100 fp16,
# H100, H200 and GB200 fp8, each normalised to its own 16384^3 point; shapes >= 2048^3 within
# 20%, the worst A100 2048^3); the sweeps do not separate the GPUs, so one value serves all.
FILL_ITERATIONS = 3.0

# Attention blocks: FA2/FA3 kernels for head_dim 128 step over 128-row blocks of Q (forward) or of
# K/V (backward) and loop over the other sequence in blocks of about 128. One block of fill fits
# the FA3 sequence-length sweep in flash-attention PR #1075 ("PCIe based H100", head_dim 128, 16
# heads, batch x tokens = 16k: 433, 538, 605, 619 and 618 TFLOP/s at 512, 1024, 2048, 4224 and
# 8448 tokens): relative to 8448 tokens the model gives 78%, 87%, 92%, 98% against the measured
# 70%, 87%, 98%, 100%.
ATTENTION_BLOCK = 128
ATTENTION_FILL_BLOCKS = 1.0
# The catalogue's attention fractions were measured at batch*heads = 32, 8192 tokens, head_dim
# 128, non-causal; the model divides out its own wave and fill factors at that shape.
ATTENTION_REFERENCE = {"batch_heads": 32, "seq": 8192}
# fp8 attention relative to bf16: FlashAttention-3 abstract (arXiv:2407.08608): bf16 'up to 740
# TFLOPs/s (75% utilization)', fp8 'close to 1.2 PFLOPs/s' = 0.61 of the 1979 fp8 peak, so an fp8
# kernel reaches 0.61 / 0.75 = 0.81 of the bf16 fraction of its own (doubled) peak.
FP8_ATTENTION_RELATIVE = (1200 / 1979) / 0.75
ATTENTION_PRECISIONS = ("fp16", "bf16", "fp8")  # no fp4 attention kernels are modelled

Precision = Literal["fp16", "bf16", "fp8", "fp4"]
Phase = Literal["fwd", "bwd"]


def gemm_time_s(
    gpu: GpuSpec,
    m,
    n,
    k,
    batch=1,
    precision: Precision = "bf16",
    *,
    calibration: CalibrationTable | None = None,
):
    """Seconds for `batch` independent (m x k) @ (k x n) products in `precision` on `gpu`.

    With a calibration table that holds GEMMs of this GPU and precision, measured shapes return
    their measured time and other shapes are corrected by the interpolation rule of
    calibration/README.md; without one, the analytical curve of the module docstring."""
    m, n, k, batch = arrays = _shapes("gemm_time_s", m=m, n=n, k=k, batch=batch)
    peak = _peak_flops(gpu, precision, "gemm_time_s")
    time_s = _gemm_model_s(gpu, peak, precision, m, n, k, batch)
    points = calibration.points(gpu.name, "gemm", precision) if calibration else None
    if points is not None:
        at_points = _gemm_model_s(gpu, peak, precision, *points.shapes.T)
        time_s = _blend(points, (m, n, k, batch), time_s, at_points)
    return _result(time_s, arrays)


def attention_time_s(
    gpu: GpuSpec,
    batch,
    heads,
    seq_q,
    seq_kv,
    head_dim,
    causal: bool,
    precision: Precision = "bf16",
    phase: Phase = "fwd",
    *,
    kv_heads=None,
    kernel: Literal["flash", "unfused"] = "flash",
    dropout: bool = False,
    calibration: CalibrationTable | None = None,
):
    """Seconds for one attention forward or backward of `heads` query heads on `gpu`.

    Attention in fp8 training runs in bf16 unless stated (Transformer Engine's default), so
    `precision` defaults to bf16. `kv_heads` (default `heads`) only sets the bytes moved (and
    calibration rows do not carry it: their analytical baseline uses `heads`).
    A causal mask is aligned bottom-right as in FlashAttention: the unmasked fraction of the
    score matrix is 1 - s_q / (2 s_kv) for s_q <= s_kv and s_kv / (2 s_q) otherwise (1/2 when
    equal). `kernel="unfused"` materialises the score matrix and computes all of it; there
    `dropout` on the attention probabilities adds its own pass over the matrix (FlashAttention
    applies dropout inside the kernel, which this model does not price)."""
    fn = "attention_time_s"
    kv_heads = heads if kv_heads is None else kv_heads
    shapes = {"batch": batch, "heads": heads, "seq_q": seq_q, "seq_kv": seq_kv, "head_dim": head_dim}
    b, h, sq, skv, d, hkv = arrays = _shapes(fn, **shapes, kv_heads=kv_heads)
    if phase not in ("fwd", "bwd"):
        raise SpecError(f"{fn}.phase: {phase!r} is not allowed; allowed: fwd, bwd")
    if precision not in ATTENTION_PRECISIONS:
        raise SpecError(f"{fn}.precision: {precision!r} is not allowed; allowed: {', '.join(ATTENTION_PRECISIONS)}")
    if kernel == "flash":
        time_s = _flash_s(gpu, precision, phase, bool(causal), b, h, sq, skv, d, hkv)
    elif kernel == "unfused":
        time_s = _unfused_attention_s(gpu, precision, phase, dropout, b, h, sq, skv, d)
    else:
        raise SpecError(f"{fn}.kernel: {kernel!r} is not allowed; allowed: flash, unfused")
    points = calibration.points(gpu.name, "attention", precision, bool(causal), phase) if calibration else None
    if points is not None:
        pb, ph, psq, pskv, pd = points.shapes.T
        if kernel == "flash":
            at_points = _flash_s(gpu, precision, phase, bool(causal), pb, ph, psq, pskv, pd, ph)
        else:
            at_points = _unfused_attention_s(gpu, precision, phase, dropout, pb, ph, psq, pskv, pd)
        time_s = _blend(points, (b, h, sq, skv, d), time_s, at_points)
    return _result(time_s, arrays)


def elementwise_time_s(gpu: GpuSpec, nbytes, *, calibration: CalibrationTable | None = None):
    """Seconds for one memory-bound kernel that reads and writes `nbytes` in total: the bytes at
    the measured streaming bandwidth (`hbm_efficiency`) plus one launch."""
    (nbytes_arr,) = arrays = _shapes("elementwise_time_s", nbytes=nbytes)
    time_s = _stream_s(gpu, nbytes_arr) + LAUNCH_OVERHEAD_S
    points = calibration.points(gpu.name, "elementwise", None) if calibration else None
    if points is not None:
        time_s = _blend(points, (nbytes_arr,), time_s, _stream_s(gpu, points.shapes[:, 0]) + LAUNCH_OVERHEAD_S)
    return _result(time_s, arrays)


def causal_fraction(seq_q, seq_kv):
    """Unmasked fraction of a bottom-right aligned causal score matrix (see attention_time_s)."""
    sq, skv = np.asarray(seq_q, dtype=float), np.asarray(seq_kv, dtype=float)
    return np.where(sq <= skv, 1.0 - sq / (2.0 * skv), skv / (2.0 * sq))


def gemm_bytes(m, n, k, batch=1, precision: str = "bf16"):
    """HBM bytes of `batch` (m x k) @ (k x n) products: both inputs read in `precision`, the
    16-bit output written once."""
    return batch * ((m * k + k * n) * INPUT_BYTES[precision] + m * n * OUTPUT_BYTES)


def _gemm_model_s(gpu: GpuSpec, peak_flops: float, precision: str, m, n, k, batch) -> np.ndarray:
    in_bytes = INPUT_BYTES[precision]
    k_tile = gpu.gemm_k_tile_bytes / in_bytes
    # A GEMM with fewer rows than a tile runs a shorter tile (down to the 16-row tensor-core
    # instruction), as libraries pick for skinny shapes.
    tile_m = np.minimum(gpu.gemm_tile_m, np.maximum(MIN_TILE_M, 2.0 ** np.ceil(np.log2(np.maximum(m, 1)))))
    tiles = batch * np.ceil(m / tile_m) * np.ceil(n / gpu.gemm_tile_n)
    waves = np.ceil(tiles / gpu.sm_count)
    sm_flops = peak_flops * gpu.gemm_efficiency_for(precision) / gpu.sm_count
    iteration_s = 2.0 * tile_m * gpu.gemm_tile_n * k_tile / sm_flops
    # Too few tiles to fill the SMs (skinny GEMMs: decode): libraries split K over the idle
    # SMs (split-K / stream-K), so each tile's mainloop is shared by that many SMs.
    k_iterations = np.ceil(k / k_tile)
    splits = np.clip(np.floor(gpu.sm_count / tiles), 1, k_iterations)
    compute_s = waves * (np.ceil(k_iterations / splits) + FILL_ITERATIONS) * iteration_s
    return np.maximum(compute_s, _stream_s(gpu, gemm_bytes(m, n, k, batch, precision))) + LAUNCH_OVERHEAD_S


def _flash_s(gpu: GpuSpec, precision: str, phase: str, causal: bool, b, h, sq, skv, d, hkv) -> np.ndarray:
    fraction = gpu.attention_efficiency_for(phase)
    if fraction is None:
        raise SpecError(
            f"attention_time_s.gpu: {gpu.name} runs no fused attention kernel (fused_attention in gpus.yaml); "
            f"allowed: kernel='unfused' (a calibration table then corrects it to measured times)"
        )
    peak = _peak_flops(gpu, precision, "attention_time_s")
    if precision == "fp8":
        fraction *= FP8_ATTENTION_RELATIVE
    unmasked = causal_fraction(sq, skv) if causal else 1.0
    flops = 4.0 * b * h * sq * skv * d * unmasked * (FLASH_BWD_FLOPS if phase == "bwd" else 1.0)
    parallel, loop = (sq, skv) if phase == "fwd" else (skv, sq)
    ref_seq = ATTENTION_REFERENCE["seq"]
    ref = _flash_shape_factor(
        gpu, ATTENTION_REFERENCE["batch_heads"] * np.ceil(ref_seq / ATTENTION_BLOCK), ref_seq, 1.0
    )
    factor = _flash_shape_factor(gpu, b * h * np.ceil(parallel / ATTENTION_BLOCK), loop, unmasked) / ref
    compute_s = flops / (peak * fraction * factor)
    in_bytes = INPUT_BYTES[precision]  # q, k, v in the kernel's precision; o, dO, dQ/dK/dV 16-bit
    if phase == "fwd":
        nbytes = b * d * (sq * h * (in_bytes + ACTIVATION_BYTES) + 2 * skv * hkv * in_bytes)
    else:
        nbytes = b * d * (sq * h * (in_bytes + 3 * ACTIVATION_BYTES) + 2 * skv * hkv * (in_bytes + ACTIVATION_BYTES))
    launches = 1 if phase == "fwd" else FLASH_BWD_KERNELS
    return np.maximum(compute_s, _stream_s(gpu, nbytes)) + launches * LAUNCH_OVERHEAD_S


def _flash_shape_factor(gpu: GpuSpec, ctas, loop_len, unmasked) -> np.ndarray:
    """Share of the asymptotic rate left after the partial last wave of `ctas` thread blocks and
    the fill of each block's loop over `loop_len` rows (of which `unmasked` are computed)."""
    waves = np.ceil(ctas / gpu.sm_count)
    occupancy = ctas / (waves * gpu.sm_count)
    loop_blocks = np.maximum(unmasked * np.ceil(loop_len / ATTENTION_BLOCK), 1.0)
    return occupancy * loop_blocks / (loop_blocks + ATTENTION_FILL_BLOCKS)


def _unfused_attention_s(gpu: GpuSpec, precision: str, phase: str, dropout: bool, b, h, sq, skv, d) -> np.ndarray:
    """Megatron-LM's pre-FlashAttention path: batched GEMMs over b*h heads around a fused
    scale-mask-softmax kernel on the full 16-bit score matrix (read scores, write
    probabilities: 4 bytes per element forward; read probabilities and their gradient, write
    the score gradient: 6 bytes backward). Dropout on the probabilities is one more kernel
    (forward: read, write, write a 1-byte mask; backward: read gradient and mask, write: 5
    bytes per element either way). Causal masking saves no work here."""
    peak = _peak_flops(gpu, precision, "attention_time_s")
    bh, scores = b * h, b * h * sq * skv
    dropout_s = _stream_s(gpu, (2 * ACTIVATION_BYTES + 1) * scores) + LAUNCH_OVERHEAD_S if dropout else 0.0
    if phase == "fwd":
        gemms = _gemm_model_s(gpu, peak, precision, sq, skv, d, bh) + _gemm_model_s(
            gpu, peak, precision, sq, d, skv, bh
        )
        return gemms + _stream_s(gpu, 2 * ACTIVATION_BYTES * scores) + LAUNCH_OVERHEAD_S + dropout_s
    grad_v = _gemm_model_s(gpu, peak, precision, skv, d, sq, bh)  # dV = P^T dO
    grad_p = _gemm_model_s(gpu, peak, precision, sq, skv, d, bh)  # dP = dO V^T
    grad_q = _gemm_model_s(gpu, peak, precision, sq, d, skv, bh)  # dQ = dS K
    grad_k = _gemm_model_s(gpu, peak, precision, skv, d, sq, bh)  # dK = dS^T Q
    softmax_s = _stream_s(gpu, 3 * ACTIVATION_BYTES * scores) + LAUNCH_OVERHEAD_S
    return grad_v + grad_p + grad_q + grad_k + softmax_s + dropout_s


def _stream_s(gpu: GpuSpec, nbytes) -> np.ndarray:
    return nbytes / (gpu.hbm_gbytes_per_s * 1e9 * gpu.hbm_efficiency)


def _peak_flops(gpu: GpuSpec, precision: str, fn: str) -> float:
    peak = gpu.peak_tflops(precision) if precision in INPUT_BYTES else None
    if peak is None:
        raise SpecError(
            f"{fn}.precision: {precision!r} is not supported by {gpu.name}; allowed: {', '.join(gpu.precisions)}"
        )
    return peak * 1e12


def _shapes(fn: str, **named) -> list[np.ndarray]:
    """The named shape arguments as float arrays broadcast together; each must be >= 1."""
    arrays = [np.asarray(v, dtype=float) for v in named.values()]
    for name, arr in zip(named, arrays):
        bad = arr[~(np.isfinite(arr) & (arr >= 1))]
        if bad.size:
            raise SpecError(f"{fn}.{name}: {bad.flat[0]:g} is not allowed; allowed: numbers >= 1")
    return list(np.broadcast_arrays(*arrays))


def _blend(points, query_arrays, analytical_s: np.ndarray, at_points_s: np.ndarray) -> np.ndarray:
    shape = np.shape(analytical_s)
    query = np.stack([np.broadcast_to(a, shape).ravel() for a in query_arrays], axis=1)
    return points.blend(query, np.ravel(analytical_s), at_points_s).reshape(shape)


def _result(time_s: np.ndarray, arrays):
    """A float for scalar inputs, else an array of the broadcast shape."""
    if all(np.ndim(a) == 0 for a in arrays):
        return float(time_s)
    return np.broadcast_to(time_s, np.broadcast_shapes(*(np.shape(a) for a in arrays))).copy()
