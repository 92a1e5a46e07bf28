"""Topology families as data: the few traits the fabric builders read, one entry a family.

Why: the bill of materials (`_fabric.py`), the tiered network and the packet graphs
(`_graphs.py`) all build from these traits, so a new family is one `register_family` call (in
its own file, or at run time) and no builder compares family names. An unknown name is one line
naming the registered ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulators._errors import SpecError


@dataclass(frozen=True)
class TopologyFamily:
    """A scale-out topology by what the builders need to know of it."""

    name: str
    help: str  # one line for `dse topologies`
    # NIC i of every server on rail leaf i of its group of servers (cross-rail traffic moves over
    # NVLink first, NCCL's PXN); otherwise NIC ports go on leaves in rank order.
    rails: bool
    # Independent planes each NIC's ports split over, each port at 1/planes of the NIC speed,
    # each plane with its own leaves and spines.
    planes: int = 1
    # A third tier: leaves in pods of k/2 under aggregation switches, a core layer above
    # (Al-Fares et al.'s k-ary fat-tree); otherwise leaves go straight to spines.
    pods: bool = False
    # Leaf switches each NIC's ports split over inside one plane (2: dual-ToR, each port on one
    # leaf of a pair that shares the tiers above), each port at 1/(planes * homing) of the NIC
    # speed: a failed leaf halves its servers' scale-out bandwidth instead of cutting them off.
    homing: int = 1
    # No tier above the leaves: every NIC port on one switch, all its radix facing down (a star).
    star: bool = False
    # Switches spread each flow's packets over every equal-cost egress by load (NVIDIA
    # Spectrum-X adaptive routing); otherwise ECMP hashes each connection onto one path. The
    # analytical model has no hash collisions for any family (load spread evenly, as adaptive
    # routing spreads it); the flow level spreads this family's flows and hashes the others'
    # (`fabric_links`), so collisions show there; the packet level hashes every family for now
    # (the graph carries the trait, `graph.graph["adaptive_routing"]`, for its engine).
    adaptive_routing: bool = False

    def __post_init__(self) -> None:
        for count in (self.planes, self.homing):
            if not self.name or not isinstance(count, int) or count < 1:
                raise SpecError(f"topology family {self.name!r}: a name, planes >= 1 and homing >= 1 are needed")
        if self.star and (self.pods or self.rails):
            raise SpecError(f"topology family {self.name!r}: a star has one switch, so no pods and no rail leaves")

    @property
    def ports_per_nic(self) -> int:
        """Switch ports each NIC has: one per plane and leaf it is homed to."""
        return self.planes * self.homing


_FAMILIES: dict[str, TopologyFamily] = {}


def register_family(family: TopologyFamily) -> TopologyFamily:
    """Add a family; a second one of the same name is refused (it would change the first's fabrics)."""
    if family.name in _FAMILIES:
        raise SpecError(f"topology family {family.name!r} is registered already")
    _FAMILIES[family.name] = family
    return family


def family_names() -> tuple[str, ...]:
    return tuple(_FAMILIES)


def get_family(name: str, field: str = "fabric.family") -> TopologyFamily:
    """The registered family `name`; SpecError naming `field` and the allowed names otherwise."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise SpecError(f"{field}: {name!r} is not allowed; allowed: {', '.join(_FAMILIES)}") from None


# Spectrum-X: NVIDIA's Ethernet platform for AI, rail-optimized like DGX SuperPOD; its Spectrum-4
# switches pick the least-congested egress per packet (RoCE adaptive routing) and BlueField-3
# SuperNICs place the out-of-order packets (NVIDIA DOCA docs, "Out-of-Order Data Placement";
# NVIDIA's Spectrum-X platform pages). Dual-ToR: each NIC's two ports on two non-stacked
# top-of-rack switches, so no ToR is a single point of failure (Alibaba HPN, SIGCOMM 2024; notes
# at wuql20.bearblog.dev "Alibaba HPN"; Alibaba HAIL 5.1's de-stacked dual uplinks).
for _family in (
    TopologyFamily("leaf-spine", "two-tier Clos, NICs on leaves in order", rails=False),
    TopologyFamily("fat-tree", "three-tier k-ary fat-tree (leaf, aggregation, core)", rails=False, pods=True),
    TopologyFamily("rail-optimized", "two tiers, NIC i of every server on rail leaf i (DGX SuperPOD)", rails=True),
    TopologyFamily(
        "dual-plane",
        "rail-optimized, each NIC's two half-speed ports on two planes (Alibaba HPN)",
        rails=True,
        planes=2,
    ),
    TopologyFamily("star", "one switch, every NIC on it, no spine (small clusters)", rails=False, star=True),
    TopologyFamily(
        "fat-tree-dual-tor",
        "fat-tree, each NIC's two half-speed ports on a pair of leaves (dual-ToR)",
        rails=False,
        pods=True,
        homing=2,
    ),
    TopologyFamily(
        "spectrum-x",
        "rail-optimized with per-packet adaptive routing (NVIDIA Spectrum-X)",
        rails=True,
        adaptive_routing=True,
    ),
):
    register_family(_family)
