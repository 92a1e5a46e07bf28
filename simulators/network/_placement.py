"""Where a communicator's members sit in the network, vectorised over candidates.

A group is (ranks n, stride k): its members are k apart in the global rank order. Megatron orders
ranks tp innermost, then cp, ep/dp, pp outermost, so the caller passes the product of the degrees
inside the group's own (tp group: 1; dp group: tp*cp; pp group: tp*cp*dp). Blocks of a level are
aligned runs of `reach` consecutive GPUs, so a block holds min(n, reach // k) members (at least
one): a group with n*k <= domain size lives in one NVLink domain; otherwise it is a two-level
group of g members per domain (g may be 1) over N = ceil(n / g) domains, and the outermost level
it crosses carries its inter-domain steps. Members at distance d (in members) are in one block of
level L when d < members per block of L: exact for aligned power-of-two sizes, the usual case.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators._errors import PlanError, SpecError
from simulators.network._network import Network
from simulators.network._scaleup import scaleup_share


def as_counts(field_name: str, value: object) -> np.ndarray:
    """`value` as a float array of integers >= 1, or a SpecError naming the field."""
    array = np.asarray(value, dtype=float)
    bad = ~np.isfinite(array) | (array < 1) | (array != np.floor(array))
    if np.any(bad):
        raise SpecError(f"{field_name}: {array[bad].flat[0]:g} is not allowed; allowed: integers >= 1")
    return array


@dataclass(frozen=True, eq=False)
class Group:
    """Placement of groups of `ranks` members `stride` apart (arrays of one broadcast shape)."""

    ranks: np.ndarray
    stride: np.ndarray
    per_block: np.ndarray  # (levels, *shape): members sharing one block of each level
    bytes_per_s: np.ndarray  # (levels, *shape): effective rate per GPU of each level for this group

    @classmethod
    def place(cls, ranks: object, stride: object, network: Network, *, point_to_point: bool = False) -> Group:
        """Place every (ranks, stride) pair; a PlanError if a group outgrows the network.
        `point_to_point`: each member talks to one peer (send_recv), so it gets one scale-up link."""
        n, k = np.broadcast_arrays(as_counts("ranks", ranks), as_counts("stride", stride))
        too_big = n * k > network.max_gpus
        if np.any(too_big):
            span = (n * k)[too_big].flat[0]
            raise PlanError(
                f"ranks*stride: a group spanning {span:g} GPUs does not fit network {network.name!r}; "
                f"allowed: at most {network.max_gpus:g} GPUs (its outermost tier)"
            )
        reach = network.levels.reach_gpus.reshape((-1,) + (1,) * n.ndim)
        with np.errstate(invalid="ignore"):  # inf // k is nan: an unbounded level holds everyone
            per_block = np.where(np.isinf(reach), n, np.clip(np.floor_divide(reach, k), 1.0, n))
        rates = np.broadcast_to(network.levels.bytes_per_s.reshape(reach.shape), per_block.shape).copy()
        rates[0] = rates[0] * scaleup_share(
            network.scaleup_topology, network.scaleup_torus_dims, network.domain_gpus, per_block[0], k, point_to_point
        )
        return cls(n, k, per_block, rates)

    def rate(self, level: np.ndarray) -> np.ndarray:
        """Effective rate per GPU of `level` (an array of level indices, one per group)."""
        level = np.asarray(level, dtype=int)
        return np.take_along_axis(self.bytes_per_s, level[None], axis=0)[0]

    @property
    def per_domain(self) -> np.ndarray:
        """g: members in one scale-up domain."""
        return self.per_block[0]

    @property
    def domains(self) -> np.ndarray:
        """N: scale-up domains the group spans."""
        return np.ceil(self.ranks / self.per_domain)

    @property
    def blocks(self) -> np.ndarray:
        """(levels, *shape): blocks of each level the group spans (domains, leaves, ...)."""
        return np.ceil(self.ranks / self.per_block)

    def level_of(self, distance: object) -> np.ndarray:
        """Index of the level that joins members `distance` apart (0: the same domain); a
        distance beyond the group counts as the farthest pair, n - 1 apart."""
        distance = np.minimum(np.asarray(distance, dtype=float), self.ranks - 1)
        return np.sum(self.per_block <= distance, axis=0)

    @property
    def top(self) -> np.ndarray:
        """The outermost level the group crosses (0 for a group inside one domain)."""
        return self.level_of(self.ranks - 1)

    @property
    def peers_per_level(self) -> np.ndarray:
        """(levels, *shape): how many of a member's n-1 peers are first reached at each level."""
        inner = np.concatenate([np.ones_like(self.per_block[:1]), self.per_block[:-1]])
        return self.per_block - inner
