"""The GPU catalogue against the datasheet peaks quoted in ../shared/validation/README.md."""

from pathlib import Path

import pytest

from simulators.hardware import PRECISIONS, get_gpu, gpu_catalog

REQUIRED = ["V100-32GB", "A100-40GB", "A100-80GB", "H100-SXM", "H800", "H200", "B200", "GB200", "MI300X"]

# Dense TFLOP/s from the peak table of shared/validation/README.md (bf16, fp8, fp4).
PUBLISHED_PEAKS = {
    "A100-40GB": (312, None, None),
    "A100-80GB": (312, None, None),
    "H100-SXM": (989, 1979, None),
    "H800": (989, 1979, None),
    "H200": (989, 1979, None),
    "B200": (2250, 4500, 9000),
    "GB200": (2500, 5000, 10000),
}


def test_catalogue_holds_every_required_gpu():
    assert set(REQUIRED) <= set(gpu_catalog())


@pytest.mark.parametrize("name,peaks", PUBLISHED_PEAKS.items())
def test_dense_peaks_match_published_figures(name, peaks):
    gpu = get_gpu(name)
    assert (gpu.bf16_tflops, gpu.fp8_tflops, gpu.fp4_tflops) == peaks


def test_every_number_has_a_source_and_every_price_a_date():
    for gpu in gpu_catalog().values():
        numbers = [k for k, v in gpu if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert set(numbers) <= set(gpu.sources), gpu.name
        assert all(gpu.sources[k].strip() for k in numbers)
        assert gpu.usd_as_of[:4].isdigit()


def test_v100_has_no_bf16_and_precisions_follow_the_peaks():
    v100 = get_gpu("V100-32GB")
    assert v100.peak_tflops("bf16") is None
    assert v100.precisions == ("fp16",)
    assert get_gpu("B200").precisions == PRECISIONS


def test_gb200_sits_in_a_72_gpu_nvlink_domain():
    assert get_gpu("GB200").scaleup_domain_gpus == 72


def test_a_gpu_without_its_network_figures_is_an_error_not_a_default():
    """A GPU file must state its NVLink and NIC efficiencies and NVLS support; leaving one out
    used to give every new GPU Hopper-class figures silently."""
    from pydantic import ValidationError

    from simulators.hardware import GpuSpec
    from simulators.network import Network

    fields = get_gpu("H100-SXM").model_dump()
    for name in ("scaleup_efficiency", "nic_efficiency", "nvls_efficiency"):
        partial = {k: v for k, v in fields.items() if k != name}
        with pytest.raises(ValidationError, match=name):
            GpuSpec(**partial)
    # The catalogue's figures reach the network: SimAI's SM80 NVLink and ConnectX-6 for A100,
    # NCCL's NVLS efficiency for Blackwell, no NVLS without an NVLink SHARP switch.
    a100, b200, mi300x = (Network.from_gpu(get_gpu(n)) for n in ("A100-80GB", "B200", "MI300X"))
    assert (a100.scaleup_efficiency, a100.nic_efficiency, a100.nvls) == (20.0 / 25, 23.5 / 25, False)
    assert b200.nvls and b200.nvls_efficiency == 0.74 and not mi300x.nvls


def test_each_gpu_takes_the_fitted_host_time_its_calibrated_like_names():
    """No default keyed by name or architecture: the GPU file says whose fitted value it takes
    (its source says why), or null for the value of GPU types without measurements."""
    import yaml

    from simulators.hardware import host_launch_s

    fitted = yaml.safe_load((Path(__file__).parents[3] / "simulators/hardware/fitted.yaml").read_text())
    per_gpu, unmeasured = fitted["host_launch_s"]["per_gpu"], fitted["host_launch_s"]["value"]
    for name in per_gpu:  # every fitted type takes its own value
        assert get_gpu(name).calibrated_like == name
    assert host_launch_s(get_gpu("H200")) == host_launch_s(get_gpu("H800")) == per_gpu["H100-SXM"]
    assert host_launch_s(get_gpu("A100-40GB")) == per_gpu["A100-80GB"]
    assert host_launch_s(get_gpu("V100-32GB")) == host_launch_s(get_gpu("MI300X")) == unmeasured
    for gpu in gpu_catalog().values():
        assert gpu.sources["calibrated_like"].strip(), gpu.name


def test_calibrated_like_must_name_a_fitted_gpu_type_and_state_its_source():
    from pydantic import ValidationError

    from simulators.hardware import GpuSpec

    fields = get_gpu("H200").model_dump()
    with pytest.raises(ValidationError, match="calibrated_like: 'H9000' has no fitted constants; allowed: A100-80GB"):
        GpuSpec(**{**fields, "calibrated_like": "H9000"})
    sources = {k: v for k, v in fields["sources"].items() if k != "calibrated_like"}
    with pytest.raises(ValidationError, match="no source for calibrated_like"):
        GpuSpec(**{**fields, "sources": sources})


def test_the_gemm_tile_is_a_gpu_field_the_wave_model_reads():
    """MI300X's 256x256 tiles: a GEMM of 304 such tiles is one wave, one tile more is two."""
    from simulators.hardware import gemm_time_s

    mi300x = get_gpu("MI300X")
    assert (mi300x.gemm_tile_m, mi300x.gemm_tile_n, mi300x.sm_count) == (256, 256, 304)
    k = 16384
    full = gemm_time_s(mi300x, 16 * 256, 19 * 256, k)  # 304 tiles
    plus_one = gemm_time_s(mi300x, 5 * 256, 61 * 256, k)  # 305 tiles
    assert plus_one / full == pytest.approx(2.0, rel=0.02)


def test_equal_gpus_hash_alike_so_memoised_costs_are_shared():
    from simulators.hardware import GpuSpec

    h100 = get_gpu("H100-SXM")
    copy = GpuSpec(**h100.model_dump())
    assert copy == h100 and hash(copy) == hash(h100) and copy is not h100


def test_an_unmeasured_gemm_fraction_is_the_median_of_the_measured_chips():
    """One measurement per chip (H800 and H200 repeat H100's, A100-40GB A100-80GB's, MI325X
    MI300X's): the fallback is their median, and only rows without a measurement take it."""
    from simulators.hardware._gpu import UNMEASURED_GEMM_EFFICIENCY

    chips = ("V100-32GB", "A100-80GB", "H100-SXM", "B200", "GB200", "MI300X")
    measured = sorted(get_gpu(name).gemm_efficiency for name in chips)
    assert UNMEASURED_GEMM_EFFICIENCY == pytest.approx((measured[2] + measured[3]) / 2, abs=0.005)
    for gpu in gpu_catalog().values():
        expected = UNMEASURED_GEMM_EFFICIENCY if gpu.gemm_efficiency is None else gpu.gemm_efficiency
        assert gpu.gemm_efficiency_for("bf16") == expected


def test_an_unmeasured_fused_attention_fraction_follows_the_gemm_fraction_as_on_the_measured_chips():
    """The median over the distinct measured chips of attention / GEMM, per phase; a chip with a
    fused kernel but no measurement takes its GEMM fraction times it, one without (V100) none."""
    from simulators.hardware._gpu import UNMEASURED_ATTENTION_PER_GEMM

    chips = [get_gpu(name) for name in ("A100-80GB", "H100-SXM", "B200", "GB200")]
    for phase in ("fwd", "bwd"):
        ratios = sorted(getattr(g, f"attention_{phase}_efficiency") / g.gemm_efficiency for g in chips)
        assert UNMEASURED_ATTENTION_PER_GEMM[phase] == pytest.approx((ratios[1] + ratios[2]) / 2, abs=0.001)
    mi300x = get_gpu("MI300X")
    assert mi300x.attention_fwd_efficiency is None and mi300x.fused_attention
    assert mi300x.attention_efficiency_for("bwd") == pytest.approx(0.51 * UNMEASURED_ATTENTION_PER_GEMM["bwd"])
    assert get_gpu("H100-SXM").attention_efficiency_for("fwd") == 0.666  # measured: kept
    assert get_gpu("V100-32GB").attention_efficiency_for("fwd") is None  # no fused kernel: unfused
