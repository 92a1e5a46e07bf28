"""SimAI topology files: byte-exact round trips, line-numbered errors, fabric graphs in and out."""

from collections import Counter
from pathlib import Path

import pytest

from simulators import SpecError
from simulators.hardware import get_gpu
from simulators.network import Fabric
from simulators.network._graphs import ecmp_path, fabric_graph
from simulators.network._simai_topology import (
    SimaiLink,
    graph_of,
    read_simai_topology,
    simai_text,
    simai_topology_of,
    write_simai_topology,
)

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared/reference/simai/topology"
H100 = get_gpu("H100-SXM")


def spectrum_x_16() -> str:
    """The reference file (SimAI gen_Topo_Template.py -topo Spectrum-X -g 16), rebuilt line by
    line so the test runs without ../shared: 16 GPUs, 2 NVSwitches (16, 17), 8 rail leaves
    (18..25), one spine (26); note the trailing space on line 2."""
    lines = ["27 8 2 9 40 H100", "".join(f"{i} " for i in range(16, 27))]
    for gpu in range(16):
        lines += [f"{gpu} {16 + gpu // 8} 2880Gbps 0.000025ms 0", f"{gpu} {18 + gpu % 8} 400Gbps 0.0005ms 0"]
    lines += [f"{leaf} 26 400Gbps 0.0005ms 0" for leaf in range(18, 26)]
    return "\n".join(lines) + "\n"


@pytest.mark.skipif(not REFERENCE.exists(), reason="../shared/reference is not beside this checkout")
def test_the_rebuilt_text_is_the_reference_file():
    assert (REFERENCE / "Spectrum-X_16g_8gps_400Gbps_H100").read_bytes() == spectrum_x_16().encode()


def test_reading_and_writing_the_reference_gives_it_back_byte_for_byte(tmp_path):
    source = tmp_path / "Spectrum-X_16g_8gps_400Gbps_H100"
    source.write_text(spectrum_x_16())
    topology = read_simai_topology(source)
    assert (topology.num_nodes, topology.num_gpus, topology.gpus_per_server, topology.gpu_type) == (27, 16, 8, "H100")
    assert topology.nvswitch_ids == (16, 17) and topology.switch_ids == tuple(range(18, 27))
    assert topology.links[0] == SimaiLink(0, 16, 2880.0, 25e-9, 0.0)
    assert topology.links[1] == SimaiLink(0, 18, 400.0, 500e-9, 0.0)
    write_simai_topology(topology, tmp_path / "out")
    assert (tmp_path / "out").read_bytes() == source.read_bytes()


def test_the_reference_as_a_graph_has_rails_and_exports_back_unchanged(tmp_path):
    source = tmp_path / "topo"
    source.write_text(spectrum_x_16())
    topology = read_simai_topology(source)
    graph = graph_of(topology)
    kinds = Counter(kind for _, kind in graph.nodes(data="kind"))
    assert kinds == {"gpu": 16, "nvswitch": 2, "leaf": 8, "spine": 1}
    assert graph.graph["pxn"] and graph.graph["domain_gpus"] == 8
    assert simai_text(simai_topology_of(graph)) == spectrum_x_16()
    path = ecmp_path(graph, 0, 11, 0)  # rail 3 of the other server: NVLink to GPU 3, then rail leaf 21
    assert path == [0, 16, 3, 21, 11]


def test_other_units_read_to_the_same_values(tmp_path):
    text = (
        spectrum_x_16().replace("2880Gbps 0.000025ms", "2.88Tbps 25ns").replace("400Gbps 0.0005ms", "400000Mbps 0.5us")
    )
    (tmp_path / "a").write_text(text)
    (tmp_path / "b").write_text(spectrum_x_16())
    assert read_simai_topology(tmp_path / "a") == read_simai_topology(tmp_path / "b")


FABRICS = [
    (Fabric("leaf-spine"), 512),
    (Fabric("fat-tree", switch_radix=8, gpus_per_server=1, nics_per_server=1), 72),
    (Fabric("rail-optimized"), 520),
    (Fabric("rail-optimized"), 64),
    (Fabric("dual-plane"), 512),
]


@pytest.mark.parametrize("fabric, n", FABRICS, ids=[f"{f.family}-{n}" for f, n in FABRICS])
def test_a_fabric_graph_survives_simai_and_back(fabric, n, tmp_path):
    graph = fabric_graph(fabric, H100, n)
    write_simai_topology(simai_topology_of(graph), tmp_path / "topo")
    back = graph_of(read_simai_topology(tmp_path / "topo"))
    assert dict(back.nodes(data="kind")) == dict(graph.nodes(data="kind"))
    assert {node: data["server"] for node, data in back.nodes(data=True) if data["kind"] == "gpu"} == {
        node: data["server"] for node, data in graph.nodes(data=True) if data["kind"] == "gpu"
    }

    def links(g):
        return {(min(u, v), max(u, v)): (d["gbps"], d["latency_s"], d["count"]) for u, v, d in g.edges(data=True)}

    assert links(back) == links(graph)
    assert back.graph["pxn"] == graph.graph["pxn"]


def test_an_exported_fabric_has_simai_header_counts():
    graph = fabric_graph(Fabric("rail-optimized"), H100, 512)  # 64 NVSwitches, 16 leaves, 8 spines
    head, ids, *links = simai_text(simai_topology_of(graph)).splitlines()
    assert head == "600 8 64 24 1536 H100"
    assert ids == "".join(f"{i} " for i in range(512, 600))
    assert links[:2] == ["0 512 3600Gbps 0.000025ms 0", "0 576 400Gbps 0.0005ms 0"]


BAD = [
    (4, "0 16 2880Gbs 0.000025ms 0"),  # unknown rate unit
    (5, "0 18 400Gbps 0"),  # a field missing
    (6, "x 16 2880Gbps 0.000025ms 0"),  # not a node id
    (7, "1 99 400Gbps 0.0005ms 0"),  # no such node
    (8, "2 16 2880Gbps 0.000025ms 2"),  # error rate above 1
    (9, "2 19 400Gbps fastms 0"),  # not a number
]


@pytest.mark.parametrize("lineno, line", BAD)
def test_a_malformed_link_line_gives_one_line_naming_file_and_line(lineno, line, tmp_path):
    lines = spectrum_x_16().split("\n")
    lines[lineno - 1] = line
    path = tmp_path / "topo"
    path.write_text("\n".join(lines))
    with pytest.raises(SpecError) as info:
        read_simai_topology(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{lineno}: ") and "\n" not in message


@pytest.mark.parametrize(
    "lineno, edit",
    [
        (1, lambda t: t.replace("27 8 2 9 40 H100", "27 8 2 9 41 H100")),  # link count disagrees
        (1, lambda t: t.replace("27 8 2 9 40 H100", "27 8 two 9 40 H100")),
        (2, lambda t: t.replace("16 17 18 ", "16 17 ", 1)),  # one switch id short
        (2, lambda t: t.replace("16 17 18 ", "16 17 3 ", 1)),  # a GPU listed as a switch
        (1, lambda t: ""),
    ],
)
def test_a_malformed_header_names_its_line(lineno, edit, tmp_path):
    path = tmp_path / "topo"
    path.write_text(edit(spectrum_x_16()))
    with pytest.raises(SpecError, match=f"^{path}:{lineno}: [^\n]*$"):
        read_simai_topology(path)


@pytest.mark.parametrize("family", ["leaf-spine", "rail-optimized", "fat-tree", "fat-tree-dual-tor", "dual-plane"])
@pytest.mark.parametrize("num_gpus", [64, 1024])
def test_a_graphs_bill_of_materials_is_the_fabrics_own(family, num_gpus):
    """Counted off the graph (switch kinds, link counts per tier) the bill of materials is the one
    bill_of_materials works out from the family's rules, and it survives a trip through a SimAI
    file, where only nodes, links and rates are left."""
    from simulators.network import bill_of_materials, graph_bill_of_materials

    fabric = Fabric(family)
    graph = fabric_graph(fabric, H100, num_gpus)
    expected = bill_of_materials(fabric, num_gpus)
    assert graph_bill_of_materials(graph) == expected
    assert graph_bill_of_materials(graph_of(simai_topology_of(graph))) == expected


def test_a_graph_with_two_port_speeds_cannot_be_priced(tmp_path):
    from simulators.network import graph_bill_of_materials

    source = tmp_path / "spectrum-x.topo"
    source.write_text(spectrum_x_16())
    graph = graph_of(read_simai_topology(source))
    kinds = dict(graph.nodes(data="kind"))
    leaf, spine = next((u, v) for u, v in graph.edges if {kinds[u], kinds[v]} == {"leaf", "spine"})
    graph.edges[leaf, spine]["gbps"] = 800.0
    with pytest.raises(SpecError, match=r"fabric links run at several rates \(400, 800 Gb/s\)"):
        graph_bill_of_materials(graph)
