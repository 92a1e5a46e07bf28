"""The GPU catalogue against the datasheet peaks quoted in ../shared/validation/README.md."""

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
