"""Cluster fabrics described once: the bill of materials and the tiered network both come from it.

A `Fabric` names a topology family and its few parameters (GPUs and NICs per server, NIC speed,
switch radix at that speed, leaf oversubscription). From it:
- `bill_of_materials(fabric, num_gpus)` counts servers, NICs, switches and links per tier, as a
  cost model needs them;
- `fabric.network(gpu, num_gpus)` gives the hierarchical `Network` the alpha-beta collective
  models run on (which GPUs one leaf joins, where the spine starts);
the packet-level simulator will build its graphs from the same description.

Families (k = switch radix; a leaf gives d = k * o / (1 + o) ports down and the rest up, with o
the oversubscription, so d = k / 2 when non-blocking):
- `leaf-spine`: two-tier Clos; every NIC on a leaf, d NICs per leaf, leaves up to k spines.
- `fat-tree`: three-tier k-ary fat-tree (Al-Fares et al., SIGCOMM 2008): pods of k/2 leaves and
  k/2 aggregation switches, a core layer above; holds up to k * (k/2) * d NICs.
- `rail-optimized`: two tiers, NIC i of each server on rail leaf i of its group of d servers
  (DGX SuperPOD, Spectrum-X); cross-rail traffic moves over NVLink first, so a whole group of
  d servers is one switch hop apart.
- `dual-plane`: rail-optimized with every NIC's two half-speed ports on two independent planes
  (Alibaba HPN's dual-ToR); twice the leaf and link count at half the port speed, same
  bandwidth per GPU, a group of d servers per leaf pair.
- `star`: one switch, all k ports facing NICs, no tier above (a small cluster: k NIC ports).
- `fat-tree-dual-tor`: a fat-tree whose NICs each have two half-speed ports on the two leaves of
  a pair (pair p holds NICs p*d .. p*d + d - 1, one port on each leaf); both leaves share the
  pod's aggregation, so a failed leaf leaves its servers half their bandwidth.
- `spectrum-x`: rail-optimized wiring with adaptive routing (`_families.py`).

`Fabric.failures` names failed switches and links (`_failures.py`): the bill of materials still
counts them (they were bought), the network and the graphs lose them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulators._errors import SpecError
from simulators.hardware import GpuSpec
from simulators.hardware._topology import is_torus
from simulators.network._failures import Failures, surviving_shares
from simulators.network._families import TopologyFamily, get_family
from simulators.network._network import NIC_LATENCY_S, Network, Tier


@dataclass(frozen=True)
class Fabric:
    """A cluster's scale-out network, described by its family and parameters."""

    family: str = "rail-optimized"
    nic_gbps: float = 400.0  # per NIC, one direction
    gpus_per_server: int = 8
    nics_per_server: int = 8
    switch_radix: int = 64  # switch ports at the port speed the family uses
    oversubscription: float = 1.0  # leaf down:up bandwidth
    port_latency_s: float = NIC_LATENCY_S  # one NIC or switch-to-switch link, one way
    failures: Failures = Failures()

    def __post_init__(self) -> None:
        get_family(self.family)  # one line naming the registered families if unknown
        for name in ("gpus_per_server", "nics_per_server", "switch_radix"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"fabric.{name}: {value!r} is not allowed; allowed: a positive integer")
        if self.switch_radix < 4 or self.switch_radix % 2:
            raise SpecError(f"fabric.switch_radix: {self.switch_radix} is not allowed; allowed: an even number >= 4")
        if not self.nic_gbps > 0:
            raise SpecError(f"fabric.nic_gbps: {self.nic_gbps!r} is not allowed; allowed: a positive number")
        if not self.oversubscription >= 1:
            raise SpecError(f"fabric.oversubscription: {self.oversubscription!r} is not allowed; allowed: >= 1")
        pods_of = 2 * self.traits.homing
        if self.traits.pods and self.switch_radix % pods_of:
            raise SpecError(
                f"fabric.switch_radix: {self.switch_radix} is not allowed for family {self.family}; allowed: a "
                f"multiple of {pods_of} (pods of whole sets of the {self.traits.homing} leaves a NIC is homed to)"
            )
        if self.traits.star and self.oversubscription != 1:
            raise SpecError(
                f"fabric.oversubscription: {self.oversubscription!r} is not allowed for family {self.family} "
                "(one switch, nothing above it); allowed: 1"
            )
        if not (isinstance(self.port_latency_s, (int, float)) and 0 <= self.port_latency_s < 1e-3):
            raise SpecError(f"fabric.port_latency_s: {self.port_latency_s!r} is not allowed; allowed: 0 <= s < 1e-3")
        if not isinstance(self.failures, Failures):
            raise SpecError(f"fabric.failures: {self.failures!r} is not allowed; allowed: a Failures value")

    @property
    def traits(self) -> TopologyFamily:
        """What the builders know of the family (simulators/network/_families.py)."""
        return get_family(self.family)

    @property
    def planes(self) -> int:
        return self.traits.planes

    @property
    def port_gbps(self) -> float:
        """Speed of one switch port (a dual-plane or dual-ToR NIC splits into two half-speed ports)."""
        return self.nic_gbps / self.traits.ports_per_nic

    @property
    def leaf_down_ports(self) -> int:
        """Leaf ports facing NICs: the radix split down:up as the oversubscription says (all of
        them on a star's one switch)."""
        if self.traits.star:
            return self.switch_radix
        down = math.floor(self.switch_radix * self.oversubscription / (1 + self.oversubscription))
        return min(max(down, 1), self.switch_radix - 1)

    @property
    def leaf_up_ports(self) -> int:
        return self.switch_radix - self.leaf_down_ports

    def leaf_block_gpus(self) -> int:
        """GPUs one switch hop apart: one leaf's NICs, or a whole rail group of servers."""
        down = self.leaf_down_ports
        if self.traits.rails:
            return down * self.gpus_per_server
        return max(down * self.gpus_per_server // self.nics_per_server, self.gpus_per_server)

    def max_gpus(self) -> int:
        """The most GPUs the family's tiers can join at this radix."""
        k, down, homing = self.switch_radix, self.leaf_down_ports, self.traits.homing
        if self.traits.star:  # one switch
            leaves = 1
        elif self.traits.pods:  # k pods of k/2 leaves
            leaves = k * (k // 2)
        else:
            leaves = k  # per plane (the spine radix)
        return leaves * down // homing * self.gpus_per_server // self.nics_per_server

    def check(self, num_gpus: int) -> None:
        """SpecError unless `num_gpus` GPUs fill whole servers and fit the family."""
        if num_gpus % self.gpus_per_server:
            raise SpecError(
                f"num_gpus={num_gpus} does not fill whole servers of fabric.gpus_per_server={self.gpus_per_server}"
            )
        if num_gpus > self.max_gpus():
            raise SpecError(
                f"num_gpus={num_gpus} exceeds what a {self.family} fabric of radix {self.switch_radix} holds "
                f"({self.max_gpus()}); use a larger fabric.switch_radix or "
                + ("a family with a spine tier" if self.traits.star else "the fat-tree family")
            )

    def network(self, gpu: GpuSpec, num_gpus: int) -> Network:
        """The tiered network collectives see: NVLink inside a server, one leaf block, then the
        rest (through the aggregation layer of a fat-tree first); bandwidth per GPU is
        its NICs' line rate and the leaf's oversubscription divides traffic that leaves it.

        With failures, each level keeps the smallest share of capacity that survives on the
        way to it (`surviving_shares`: the worst GPU's NIC ports, the worst leaf's uplinks, the
        worst pod's core links): a synchronous step waits for its slowest group."""
        self.check(num_gpus)
        per_gpu_gbytes = self.nic_gbps * self.nics_per_server / self.gpus_per_server / 8.0
        base = Network.from_gpu(gpu)
        # A server inside one NVLink domain (up to 72 GPUs of an NVL72 rack) is all NVLink; a
        # server larger than the domain holds whole domains (gcd: 16 GPUs of 8-GPU domains -> 8).
        small = self.gpus_per_server <= base.domain_gpus
        domain = self.gpus_per_server if small else math.gcd(base.domain_gpus, self.gpus_per_server)
        # A torus is cabled between hosts (ICI, NeuronLink): servers do not cut it.
        domain = base.domain_gpus if is_torus(base.scaleup_topology) else domain
        block = self.leaf_block_gpus()
        tiers = []  # (GPUs the tier joins, its oversubscription, the index of its share below)
        if block < num_gpus:
            tiers.append((block, 1.0, 0))
            if self.traits.pods:
                pod = block * (self.switch_radix // 2) // self.traits.homing  # k/2 leaves: k/(2h) leaf sets
                if pod < num_gpus:
                    tiers.append((pod, self.oversubscription, 1))
                    tiers.append((_round_up(num_gpus, pod), 1.0, 2))
                else:
                    tiers.append((_round_up(num_gpus, block), self.oversubscription, 1))
            else:
                tiers.append((_round_up(num_gpus, block), self.oversubscription, 1))
        elif domain < num_gpus:
            tiers.append((_round_up(num_gpus, domain), 1.0, 0))
        shares = surviving_shares(self, gpu, num_gpus) if self.failures else (1.0, 1.0, 1.0)
        survived = [min(shares[: i + 1]) for i in range(len(shares))]  # what is left on the way up
        kept, inner_share = [], survived[0]
        for group, oversubscription, index in _nested(tiers, domain):
            kept.append(Tier(group, oversubscription * inner_share / survived[index], 2 * self.port_latency_s))
            inner_share = survived[index]
        return Network(
            name=f"{gpu.name} {self.family} {self.nic_gbps:g}G" + (f" ({self.failures})" if self.failures else ""),
            domain_gpus=domain,
            scaleup_gbytes_per_s=base.scaleup_gbytes_per_s,
            nic_gbytes_per_s=per_gpu_gbytes * survived[0],
            nvls=base.nvls,
            tiers=tuple(kept),
            nic_latency_s=self.port_latency_s,
            scaleup_efficiency=base.scaleup_efficiency,
            nic_efficiency=base.nic_efficiency,
            nvls_efficiency=base.nvls_efficiency,
            scaleup_topology=base.scaleup_topology,
            scaleup_torus_dims=base.scaleup_torus_dims,
        )


@dataclass(frozen=True)
class BillOfMaterials:
    """What a fabric of `num_gpus` GPUs is built from. Switch and link counts are per tier, from
    the servers outwards (tier 0: NIC-to-leaf links and leaves)."""

    servers: int
    nics: int
    switches: tuple[int, ...]
    links: tuple[int, ...]
    port_gbps: float

    @property
    def total_switches(self) -> int:
        return sum(self.switches)

    @property
    def total_links(self) -> int:
        return sum(self.links)


def bill_of_materials(fabric: Fabric, num_gpus: int) -> BillOfMaterials:
    """Servers, NICs, switches and links per tier for `num_gpus` GPUs on `fabric`.

    Leaves take `leaf_down_ports` NIC ports each (rail-optimized: one leaf per rail and plane for
    each group of that many servers; dual-ToR: a pair of leaves per that many NICs), and a leaf
    with n ports in use has ceil(n / o) uplinks.
    A spine layer exists only where one leaf (one rail group) does not join everything; each
    tier has as many switches as its incoming links fill. A fat-tree groups leaves into pods of
    k/2, each pod's aggregation switches taking k/2 leaf uplinks apiece, and adds a core layer
    above the aggregation when there is more than one pod (non-blocking above the leaves)."""
    fabric.check(num_gpus)
    servers = num_gpus // fabric.gpus_per_server
    nics = servers * fabric.nics_per_server
    down, k, o = fabric.leaf_down_ports, fabric.switch_radix, fabric.oversubscription
    nic_links = nics * fabric.traits.ports_per_nic
    if fabric.traits.rails:
        groups = -(-servers // down)
        leaves = groups * fabric.nics_per_server * fabric.planes
        ports_in_use = [min(down, servers - g * down) for g in range(groups)] * (fabric.nics_per_server * fabric.planes)
        if groups == 1:  # every rail leaf reaches every server: rails meet over NVLink, no spine
            return BillOfMaterials(servers, nics, (leaves,), (nic_links,), fabric.port_gbps)
    else:  # NIC ports in order, `homing` leaves side by side taking the same NICs' ports
        homing = fabric.traits.homing
        leaves = homing * -(-nics // down)
        ports_in_use = [min(down, nics - i // homing * down) for i in range(leaves)]
        if leaves == homing:  # one leaf (or leaf pair) reaches every NIC: no tier above
            return BillOfMaterials(servers, nics, (leaves,), (nic_links,), fabric.port_gbps)
    leaf_uplinks = [math.ceil(n / o) for n in ports_in_use]
    uplinks = sum(leaf_uplinks)
    if not fabric.traits.pods or leaves <= k // 2:  # two tiers (a fat-tree of one pod too)
        planes = fabric.planes  # each plane has its own spines
        spines = planes * -(-(uplinks // planes) // k)
        return BillOfMaterials(servers, nics, (leaves, spines), (nic_links, uplinks), fabric.port_gbps)
    half = k // 2
    pods = [leaf_uplinks[i : i + half] for i in range(0, leaves, half)]
    aggregation = sum(-(-sum(pod) // half) for pod in pods)
    return BillOfMaterials(
        servers, nics, (leaves, aggregation, -(-uplinks // k)), (nic_links, uplinks, uplinks), fabric.port_gbps
    )


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _nested(tiers: list[tuple], domain: int) -> list[tuple]:
    """Tiers (GPUs joined first) that grow strictly from the inside out (drop a tier no bigger
    than the one inside)."""
    out, inner = [], domain
    for tier in tiers:
        if tier[0] > inner and tier[0] % inner == 0:
            out.append(tier)
            inner = tier[0]
    return out
