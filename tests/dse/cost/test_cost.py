"""Cost metrics against hand computation for a known candidate, and the price book's rules."""

from pathlib import Path

import pytest
import yaml

from dse.cost import cost_metrics, default_price_book, ownership, price_book
from dse.errors import SpecError
from simulators.hardware import GpuSpec, get_gpu, gpu_catalog
from simulators.network import Fabric


def test_capex_and_power_of_1024_h100s_on_a_rail_optimized_fabric_by_hand():
    """128 servers; 4 rail groups x 8 rails = 32 leaves with 32 uplinks each on 16 spines:
    2048 links and 48 x 64 = 3072 switch ports."""
    book = default_price_book()
    owned = ownership(get_gpu("H100-SXM"), 1024, Fabric("rail-optimized"), book)
    capex = 128 * 294_000 + 1024 * 2_000 + 3072 * 562.5 + 2048 * 750
    watts = 1024 * 700 + 128 * 4_600 + 3072 * 27 + 2048 * 17
    assert owned.capex_usd == pytest.approx(capex)
    assert owned.it_power_kw == pytest.approx(watts / 1e3)


def test_metrics_of_a_known_candidate_by_hand():
    book = price_book({"pue": 1.5, "usd_per_kwh": 0.10, "amortisation_years": 5, "utilisation": 0.8})
    owned = ownership(get_gpu("H100-SXM"), 64, Fabric("leaf-spine"), book)
    # 8 servers, 64 NICs, 2 leaves + 1 spine: 128 links, 192 switch ports.
    capex = 8 * 294_000 + 64 * 2_000 + 192 * 562.5 + 128 * 750
    it_kw = (64 * 700 + 8 * 4_600 + 192 * 27 + 128 * 17) / 1e3
    assert owned.capex_usd == pytest.approx(capex) and owned.it_power_kw == pytest.approx(it_kw)
    tokens_per_s = 500_000.0
    out = cost_metrics({"tokens_per_s": tokens_per_s}, 64, 2.99, 1e12, owned, book)
    per_hour = capex / (5 * 8760 * 0.8) + it_kw * 1.5 * 0.10
    mtok_per_hour = tokens_per_s * 3600 / 1e6
    assert out["usd_per_hour"] == pytest.approx(64 * 2.99)
    assert out["usd_per_mtok"] == pytest.approx(64 * 2.99 / mtok_per_hour)
    assert out["owned_usd_per_hour"] == pytest.approx(per_hour)
    assert out["owned_usd_per_mtok"] == pytest.approx(per_hour / mtok_per_hour)
    assert out["kwh_per_mtok"] == pytest.approx(it_kw * 1.5 / mtok_per_hour)
    assert out["co2e_kg_per_mtok"] == pytest.approx(it_kw * 1.5 / mtok_per_hour * 0.366)
    hours = 1e12 / (tokens_per_s * 3600)
    assert out["time_to_train_days"] == pytest.approx(hours / 24)
    assert out["cost_to_train_usd"] == pytest.approx(hours * 64 * 2.99)
    assert out["owned_cost_to_train_usd"] == pytest.approx(hours * per_hour)


def test_every_default_price_says_where_it_came_from():
    book = default_price_book()
    prices = [*book.server_usd.values(), *book.nic_usd.values(), book.pue, book.grid_kg_co2e_per_kwh]
    prices += [p for tier in book.cloud_usd_per_gpu_hour.values() for p in tier.values()]
    assert all(p.source and p.as_of for p in prices)


def test_a_gpu_without_a_server_price_has_no_owned_metrics():
    """A GPU of a user's own file (tests/data/catalogs/toy_gpu.yaml) is not in the default book."""
    rows = yaml.safe_load((Path(__file__).parents[2] / "data" / "catalogs" / "toy_gpu.yaml").read_text())
    toy = GpuSpec.model_validate(rows[0])
    assert ownership(toy, 64, Fabric(), default_price_book()) is None


def test_every_catalogue_gpu_has_a_sourced_server_price():
    book = default_price_book()
    assert set(book.server_usd) == {gpu.name for gpu in gpu_catalog().values()}
    derived = [p for p in book.server_usd.values() if p.source.startswith("derived")]
    assert all("ratio" in p.source for p in derived)


def test_a_derived_server_price_follows_the_rental_ratio_rule():
    """The documented rule: the H100 server times the GPU's rental price over H100's (rounded to $1k)."""
    book, h100 = default_price_book(), get_gpu("H100-SXM")
    for name in ("MI300X", "MI325X", "TPU-v5p", "TPU-v6e", "Trainium2"):
        rule = book.server_usd["H100-SXM"].value * get_gpu(name).usd_per_gpu_hour / h100.usd_per_gpu_hour
        assert book.server_usd[name].value == pytest.approx(rule, abs=500)


def test_a_speed_the_book_lacks_is_a_one_line_error_naming_the_table():
    with pytest.raises(SpecError, match=r"cost.nic_usd: no price for 1600 Gb/s; allowed: 100, 200, 400, 800"):
        ownership(get_gpu("H100-SXM"), 64, Fabric(nic_gbps=1600), default_price_book())


def test_capex_of_a_dual_tor_fat_tree_by_hand():
    """1024 H100s, each NIC two 200G ports: 2048 NIC links, 2048 leaf-aggregation and 2048
    aggregation-core links (6144 links at the 200G price) and 160 switches of 64 ports, 10240
    switch ports, at the 200G port price; the NICs stay 400G adapters."""
    book = default_price_book()
    owned = ownership(get_gpu("H100-SXM"), 1024, Fabric("fat-tree-dual-tor"), book)
    ports = 6144 * 2 - 2048
    assert ports == 160 * 64
    capex = 128 * 294_000 + 1024 * 2_000 + ports * 281.25 + 6144 * 375
    assert owned.capex_usd == pytest.approx(capex)
