"""The GPU catalogue: datasheet figures per accelerator, validated at load (STYLE 5).

Units are in the field names: TFLOP/s are dense (no structured sparsity), bandwidths are per GPU
and one direction, `nic_gbps` is gigabits per second, bandwidths in GB/s are 1e9 B/s, memory
capacity is in GiB (2^30 B).

Nothing in the simulators is keyed by a GPU's name or architecture: every property a kernel or
collective model reads is a field here, so a GPU from a user's file (`hardware.gpu_catalog`)
behaves as its figures say. Every field is required (a GPU file that leaves one out is an error).
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, model_validator

from simulators._registry import Registry, load_catalog
from simulators._yaml import safe_load
from simulators.hardware._topology import check_topology

PRECISIONS = ("fp16", "bf16", "fp8", "fp4")
# The large-GEMM fraction of an accelerator nobody has published a measurement for (gemm_efficiency
# null): the median of the distinct chips the catalogue has measured (V100 0.78, A100 0.87,
# H100 0.80, B200 0.78, GB200 0.73, MI300X 0.51), so an unmeasured chip is neither the best nor
# the worst; tests/simulators/hardware/test_gpu.py recomputes it from the catalogue.
UNMEASURED_GEMM_EFFICIENCY = 0.778
# The fused-attention fraction of a chip whose stacks run a fused kernel nobody has measured
# (fused_attention true, attention_*_efficiency null), relative to its GEMM fraction: the median
# over the distinct chips measured of attention / GEMM (A100 0.71 / 0.56, H100 0.83 / 0.70,
# B200 0.87 / 0.77, GB200 1.01 / 0.89, fwd / bwd); tests/simulators/hardware/test_gpu.py
# recomputes them. Pricing such a chip's attention unfused (its score matrix in HBM) would
# charge it for a kernel its frameworks do not run.
UNMEASURED_ATTENTION_PER_GEMM = {"fwd": 0.853, "bwd": 0.737}


class GpuSpec(BaseModel):
    """One accelerator as its datasheet and market describe it."""

    # Strict and finite: a user's GPU file is user input (no bool or string taken for a number);
    # `aliases` stays lax so YAML lists become tuples.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=255)
    aliases: tuple[str, ...] = Field(default=(), strict=False)
    vendor: str
    bf16_tflops: float | None = Field(gt=0)
    fp16_tflops: float | None = Field(gt=0)
    fp8_tflops: float | None = Field(gt=0)
    fp4_tflops: float | None = Field(gt=0)
    hbm_gib: float = Field(gt=0)
    hbm_gbytes_per_s: float = Field(gt=0)
    scaleup_gbytes_per_s: float = Field(gt=0)
    scaleup_domain_gpus: int = Field(ge=1)
    # How the domain is wired: switch (NVSwitch), full_mesh (xGMI, Gaudi 3's RoCE all-to-all),
    # torus_2d or torus_3d (ICI, NeuronLink) with the torus dims (null otherwise), the first
    # dimension varying fastest in rank order (simulators/network/_scaleup.py).
    scaleup_topology: str
    scaleup_torus_dims: tuple[int, ...] | None = Field(strict=False)
    nic_gbps: float = Field(gt=0)
    tdp_w: float = Field(gt=0)
    usd_per_gpu_hour: float = Field(gt=0)
    usd_as_of: str
    gemm_efficiency: float | None = Field(gt=0, le=1)  # None: not measured, UNMEASURED_GEMM_EFFICIENCY
    architecture: str = Field(min_length=1)  # a label (hopper, cdna3...): nothing is keyed by it
    sm_count: int = Field(ge=1)
    # The output tile one SM computes at a time and the input bytes of K per mainloop iteration
    # (simulators/hardware/_compute.py: waves and pipeline fill).
    gemm_tile_m: int = Field(ge=16)
    gemm_tile_n: int = Field(ge=8)
    gemm_k_tile_bytes: int = Field(ge=16)
    # The GPU type whose fitted software-stack constants (fitted.yaml host_launch_s.per_gpu) this
    # one takes: itself where it has its own; None, written out: no fitted type stands for it and
    # it takes fitted.yaml's value for GPU types without measurements. Its source says why.
    calibrated_like: str | None
    fp8_gemm_efficiency: float | None = Field(gt=0, le=1)
    fp4_gemm_efficiency: float | None = Field(gt=0, le=1)
    hbm_efficiency: float = Field(gt=0, le=1)
    attention_fwd_efficiency: float | None = Field(gt=0, le=1)
    attention_bwd_efficiency: float | None = Field(gt=0, le=1)
    fused_attention: bool  # whether the chip's training stacks run a FlashAttention-class kernel
    # Shares of the line rates collectives see (SimAI's bus-bandwidth model) and NCCL's NVLS
    # efficiency (None: the scale-up domain has no in-switch reduction). Required, as every
    # field: a GPU file that leaves one out is an error, not a Hopper-class default.
    scaleup_efficiency: float = Field(gt=0, le=1)
    nic_efficiency: float = Field(gt=0, le=1)
    nvls_efficiency: float | None = Field(gt=0, le=1)
    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_number_has_a_source(self) -> GpuSpec:
        numeric = [k for k, v in self if isinstance(v, (int, float)) and not isinstance(v, bool)]
        named = ("calibrated_like", "scaleup_topology", "gemm_efficiency", "fused_attention")
        missing = [k for k in (*numeric, *named) if k not in self.sources]
        if missing:
            raise ValueError(f"no source for {', '.join(missing)}")
        problem = check_topology(self.scaleup_topology, self.scaleup_torus_dims or (), self.scaleup_domain_gpus)
        if problem:
            raise ValueError(f"scaleup_topology: {problem}")
        constants = _fitted()
        fitted = sorted(
            constants["host_launch_s"]["per_gpu"].keys() & constants["sustained_compute_fraction"]["per_gpu"]
        )
        if self.calibrated_like is not None and self.calibrated_like not in fitted:
            raise ValueError(
                f"calibrated_like: {self.calibrated_like!r} has no fitted constants; allowed: {', '.join(fitted)}, "
                "or null (the value for GPU types without measurements)"
            )
        return self

    def __hash__(self) -> int:
        """Hash of a few figures: consistent with equality and cheap, since memoised cost
        functions take the GPU itself (not its name) as part of their key."""
        return hash((self.name, self.bf16_tflops, self.fp16_tflops, self.hbm_gbytes_per_s, self.sm_count))

    def peak_tflops(self, precision: str) -> float | None:
        """Dense tensor-core peak for a GEMM precision, or None where the GPU lacks it."""
        return getattr(self, f"{precision}_tflops")

    def sustaining(self, fraction: float) -> GpuSpec:
        """This GPU with its compute peaks at `fraction` of the catalogue's (the share of the
        modelled kernel speed a software stack sustains) and its memory as it is, so kernels
        bound by HBM bandwidth keep their speed."""
        if fraction == 1.0:
            return self
        peaks = {f"{p}_tflops": self.peak_tflops(p) * fraction for p in PRECISIONS if self.peak_tflops(p)}
        return self.model_copy(update=peaks)

    def gemm_efficiency_for(self, precision: str) -> float:
        """Measured large-GEMM fraction of the `precision` peak. Where the catalogue has no
        measurement for fp4 (fp8), the fraction of the next wider precision stands in: an
        unmeasured narrow format is never assumed to beat a measured wide one; with no bf16
        measurement either, UNMEASURED_GEMM_EFFICIENCY."""
        if precision == "fp4" and self.fp4_gemm_efficiency is not None:
            return self.fp4_gemm_efficiency
        if precision in ("fp4", "fp8") and self.fp8_gemm_efficiency is not None:
            return self.fp8_gemm_efficiency
        return UNMEASURED_GEMM_EFFICIENCY if self.gemm_efficiency is None else self.gemm_efficiency

    def attention_efficiency_for(self, phase: str) -> float | None:
        """The fused-attention fraction of the bf16 peak for `phase` (fwd, bwd): measured, else
        for a chip with a fused kernel its GEMM fraction times UNMEASURED_ATTENTION_PER_GEMM,
        else None (no fused kernel: attention runs unfused)."""
        measured = self.attention_fwd_efficiency if phase == "fwd" else self.attention_bwd_efficiency
        if measured is not None or not self.fused_attention:
            return measured
        return self.gemm_efficiency_for("bf16") * UNMEASURED_ATTENTION_PER_GEMM[phase]

    @property
    def precisions(self) -> tuple[str, ...]:
        return tuple(p for p in PRECISIONS if self.peak_tflops(p) is not None)

    @property
    def hbm_bytes(self) -> float:
        """HBM capacity in bytes. Marketed sizes are binary: an "80 GB" H100 shows 81,559 MiB
        in nvidia-smi, a "141 GB" H200 143,771 MiB; so the catalogue states GiB."""
        return self.hbm_gib * 2**30

    @property
    def nic_gbytes_per_s(self) -> float:
        return self.nic_gbps / 8.0


@cache
def gpu_catalog() -> Registry[GpuSpec]:
    """All GPUs of `gpus.yaml`, keyed by name and aliases."""
    return load_catalog(__package__, "gpus.yaml", GpuSpec, "GPU")


def get_gpu(name: str, field: str = "gpu") -> GpuSpec:
    """The GPU called `name`; a CatalogError naming `field` if there is none."""
    return gpu_catalog().lookup(name, field)


@cache
def _fitted() -> dict:
    return safe_load(resources.files(__package__).joinpath("fitted.yaml").read_text())


def sustained_compute_fraction(gpu: GpuSpec | None) -> float:
    """The fitted share of modelled kernel speed the software stack of `gpu` sustains (fitted.yaml
    `sustained_compute_fraction`, with provenance); None: the value for GPU types without
    measurements."""
    return _fitted_for("sustained_compute_fraction", gpu)


def host_launch_s(gpu: GpuSpec) -> float:
    """Fitted host time a training framework spends per kernel it launches on `gpu` (fitted.yaml
    `host_launch_s`)."""
    return _fitted_for("host_launch_s", gpu)


def _fitted_for(name: str, gpu: GpuSpec | None) -> float:
    """Fitted constant `name` of the GPU type `gpu.calibrated_like` names (the catalogue says why
    each GPU takes whose), or, where it names none, the value for GPU types without measurements."""
    entry = _fitted()[name]
    like = None if gpu is None else gpu.calibrated_like
    return float(entry["value"] if like is None else entry["per_gpu"][like])
