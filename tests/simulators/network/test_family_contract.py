"""The contract every registered topology family keeps, and a toy family added at run time."""

import networkx as nx
import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import (
    Fabric,
    TopologyFamily,
    _families,
    bill_of_materials,
    family_names,
    get_family,
    register_family,
)
from simulators.network._graphs import fabric_graph

H100 = get_gpu("H100-SXM")
# A family no builder knows by name: rails over four planes (four quarter-speed ports a NIC).
TOY = TopologyFamily("quad-plane", "rails over four planes (a test family)", rails=True, planes=4)


@pytest.fixture(params=[*family_names(), TOY.name])
def family(request, monkeypatch):
    """Every registered family, and the toy one registered for this test only."""
    if request.param == TOY.name:
        monkeypatch.setitem(_families._FAMILIES, TOY.name, TOY)
    return get_family(request.param)


@pytest.mark.parametrize("num_gpus", [64, 512])
def test_the_graph_the_bill_of_materials_and_the_network_agree(family, num_gpus):
    radix = 64 if Fabric(family.name).max_gpus() >= num_gpus else 512  # a star of 512 GPUs needs a big switch
    fabric = Fabric(family.name, switch_radix=radix)
    graph = fabric_graph(fabric, H100, num_gpus)
    bom = bill_of_materials(fabric, num_gpus)
    assert nx.is_connected(graph)
    assert sum(1 for _, k in graph.nodes(data="kind") if k == "gpu") == num_gpus
    assert bom.links[0] == num_gpus // fabric.gpus_per_server * fabric.nics_per_server * family.ports_per_nic
    switches = sum(1 for _, k in graph.nodes(data="kind") if k in ("leaf", "spine", "aggregation", "core"))
    assert switches == sum(bom.switches)
    assert fabric.port_gbps == fabric.nic_gbps / family.ports_per_nic
    for node, kind in graph.nodes(data="kind"):
        if kind in ("leaf", "spine", "core"):
            assert graph.degree(node, weight="count") <= fabric.switch_radix
    network = fabric.network(H100, num_gpus)
    assert network.max_gpus >= num_gpus


def test_an_unknown_family_is_one_line_naming_the_registered_ones():
    with pytest.raises(SpecError, match="fabric.family: 'torus' is not allowed; allowed: leaf-spine, fat-tree"):
        Fabric("torus")
    with pytest.raises(SpecError, match="registered already"):
        register_family(TopologyFamily("leaf-spine", "again", rails=False))


def test_a_family_registered_at_run_time_reaches_the_spec(monkeypatch, write_spec):
    from dse.spec import load_study
    from dse.study import resolve_study
    from tests.conftest import TINY_SPEC

    monkeypatch.setitem(_families._FAMILIES, TOY.name, TOY)
    text = TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n  fabric: {family: [quad-plane]}")
    resolved = resolve_study(load_study(write_spec(text)))
    assert resolved.fabric("quad-plane", 400.0).planes == 4
