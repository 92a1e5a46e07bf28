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

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.planes, int) or self.planes < 1:
            raise SpecError(f"topology family {self.name!r}: a name and planes >= 1 are needed")


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


for _family in (
    TopologyFamily("leaf-spine", "two-tier Clos, NICs on leaves in order", rails=False),
    TopologyFamily("fat-tree", "three-tier k-ary fat-tree (leaf, aggregation, core)", rails=False, pods=True),
    TopologyFamily(
        "rail-optimized", "two tiers, NIC i of every server on rail leaf i (DGX SuperPOD, Spectrum-X)", rails=True
    ),
    TopologyFamily(
        "dual-plane",
        "rail-optimized, each NIC's two half-speed ports on two planes (Alibaba HPN)",
        rails=True,
        planes=2,
    ),
):
    register_family(_family)
