"""Networks: hierarchical tiers, rank placement and collective algorithms with their costs."""

from simulators.network import (  # noqa: F401  (each registers its algorithm)
    _direct,
    _halving_doubling,
    _hierarchical,
    _nvls,
    _pairwise,
    _ring,
    _tree,
)
from simulators.network._algorithm import (
    ALGORITHMS,
    OPS,
    Choice,
    algorithm_bandwidth_gbytes_per_s,
    bus_bandwidth_gbytes_per_s,
    choose_algorithm,
    collective_schedule,
    collective_time_s,
)
from simulators.network._calibration import CollectiveCalibration, CollectiveCurve
from simulators.network._contention import CongestionFactor
from simulators.network._fabric import BillOfMaterials, Fabric, bill_of_materials
from simulators.network._failures import Failures, surviving_graph
from simulators.network._families import TopologyFamily, family_names, get_family, register_family
from simulators.network._network import Network, Tier
from simulators.network._placement import Group
from simulators.network._schedule import Schedule, Transfer
from simulators.network._transfers import Flow, FlowArrays, Link, Route, collective_flows

__all__ = [
    "CongestionFactor",
    "Flow",
    "FlowArrays",
    "Link",
    "Route",
    "collective_flows",
    "fabric_links",
    "groups_of",
    "nvswitch_of",
    "ALGORITHMS",
    "KINDS",
    "Router",
    "SimaiLink",
    "SimaiTopology",
    "BillOfMaterials",
    "Failures",
    "draw_fabric",
    "surviving_graph",
    "TopologyFamily",
    "family_names",
    "get_family",
    "register_family",
    "Fabric",
    "bill_of_materials",
    "CollectiveCalibration",
    "CollectiveCurve",
    "OPS",
    "Choice",
    "Group",
    "Network",
    "Schedule",
    "Transfer",
    "Tier",
    "algorithm_bandwidth_gbytes_per_s",
    "bus_bandwidth_gbytes_per_s",
    "choose_algorithm",
    "collective_schedule",
    "collective_time_s",
    "ecmp_hops",
    "ecmp_path",
    "fabric_graph",
    "graph_bill_of_materials",
    "graph_of",
    "read_simai_topology",
    "simai_topology_of",
    "write_simai_topology",
]


# The graph side needs networkx (~0.1 s to import); load it only when a graph is asked for, so the
# analytical and serving paths start fast.
_LAZY = {
    **{name: "simulators.network._graphs" for name in ("KINDS", "Router", "ecmp_hops", "ecmp_path", "fabric_graph")},
    **{name: "simulators.network._fabric_links" for name in ("fabric_links", "groups_of", "nvswitch_of")},
    "draw_fabric": "simulators.network._drawing",
    **{
        name: "simulators.network._simai_topology"
        for name in (
            "SimaiLink",
            "SimaiTopology",
            "graph_bill_of_materials",
            "graph_of",
            "read_simai_topology",
            "simai_topology_of",
            "write_simai_topology",
        )
    },
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simulators.network' has no attribute {name!r}")
