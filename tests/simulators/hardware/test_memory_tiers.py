"""The host memory tier catalogue: every number sourced, shares and transfer times by hand."""

import pytest
from pydantic import ValidationError

from simulators.hardware import HostTier, gpu_catalog, host_tier_for, host_tiers, transfer_s


def test_every_number_has_a_source_and_a_date():
    for tier in host_tiers():
        numbers = [k for k, v in tier if isinstance(v, (int, float)) and not isinstance(v, bool)]
        assert set(numbers) <= set(tier.sources), tier.name
        assert all(tier.sources[k].strip() for k in numbers)
        assert len(tier.as_of) == 7 and tier.as_of[4] == "-"


def test_pcie_line_rates_follow_the_encoding_closed_form():
    # GT/s x 16 lanes x 128/130 / 8 bits, rounded as the catalogue states them.
    rates = {"pcie-gen3-x16": 8, "pcie-gen4-x16": 16, "pcie-gen5-x16": 32}
    for tier in host_tiers():
        if tier.link in rates:
            assert tier.link_gbytes_per_s == pytest.approx(rates[tier.link] * 16 * 128 / 130 / 8, rel=0.01)


def test_dgx_h100_share_per_gpu_by_hand():
    tier = host_tier_for("H100-SXM")
    assert tier.memory_bytes_per_gpu == 2048 * 2**30 / 8
    assert tier.memory_gbytes_per_s_per_gpu == pytest.approx(2 * 8 * 4800e6 * 8 / 1e9 / 8)


def test_grace_superchips_use_nvlink_c2c_and_every_named_catalogue_gpu_exists():
    assert host_tier_for("GB200").link == "nvlink-c2c"
    assert host_tier_for("GB200").memory_bytes_per_gpu == 480 * 2**30 / 2
    named = {gpu for tier in host_tiers() for gpu in tier.gpus} - {"GH200"}  # GH200: for users' GPU files
    for name in named:
        assert gpu_catalog().lookup(name, "gpu").name == name


def test_a_gpu_without_a_row_has_no_tier():
    assert host_tier_for("MI300X") is None


def test_transfer_time_closed_form():
    assert transfer_s(63e9, 63.0) == pytest.approx(1.0)
    assert transfer_s(2**30, 450) == pytest.approx(2**30 / 450e9)


def test_a_row_without_a_source_or_with_an_unknown_link_is_refused():
    row = dict(
        name="x",
        gpus=["y"],
        gpus_per_host=8,
        host_memory_gib=1024.0,
        host_memory_gbytes_per_s=400.0,
        link="pcie-gen5-x16",
        link_gbytes_per_s=63.0,
        as_of="2026-12",
        sources={},
    )
    with pytest.raises(ValidationError, match="no source for"):
        HostTier.model_validate(row)
    sources = {k: "s" for k in ("gpus_per_host", "host_memory_gib", "host_memory_gbytes_per_s", "link_gbytes_per_s")}
    with pytest.raises(ValidationError, match="allowed: pcie-gen3-x16"):
        HostTier.model_validate({**row, "sources": sources, "link": "pcie-gen6"})


def test_nvme_tiers_give_both_figures_and_dgx_h100_shares_them_by_hand():
    tier = host_tier_for("H100-SXM")
    assert tier.nvme_bytes_per_gpu == 28610 * 2**30 / 8
    assert tier.nvme_gbytes_per_s_per_gpu == pytest.approx(16 * 4 * 128 / 130 / 8, rel=0.01)  # one Gen4 x4 drive
    assert host_tier_for("GB200").nvme_bytes_per_gpu is None
    row = host_tier_for("H100-SXM").model_dump()
    with pytest.raises(ValidationError, match="give both or neither"):
        HostTier.model_validate({**row, "nvme_gbytes_per_s": None})


def test_cxl_expanders_add_capacity_and_interleaved_bandwidth():
    """DGX-H100 with eight 256 GB Micron CZ120 modules (36 GB/s each): per GPU an eighth of
    2,048 GiB of DIMMs plus 8 x 256e9 B of CXL, and of 614.4 + 8 x 36 GB/s."""
    from simulators.hardware._memory_tiers import host_tier_named

    plain, cxl = host_tier_named("DGX-H100", "t"), host_tier_named("DGX-H100-CXL-8x256GB", "t")
    assert cxl.memory_bytes_per_gpu == pytest.approx((2048 * 2**30 + 8 * 256e9) / 8, rel=1e-4)
    assert cxl.memory_gbytes_per_s_per_gpu == pytest.approx((614.4 + 8 * 36) / 8)
    assert cxl.link_gbytes_per_s == plain.link_gbytes_per_s  # the GPU reaches both over its PCIe link
    assert cxl.gpus == ()  # a configuration a spec names, no GPU's default host
