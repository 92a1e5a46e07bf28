"""How the GPUs of one scale-up domain are wired, and the share of a GPU's scale-up bandwidth a
collective over some of them can use.

Why: an NVSwitch gives any set of its GPUs the full per-GPU rate, but a point-to-point scale-up
network splits that rate over links, so a pair of GPUs (a pipeline send, tp=2) gets one link's
worth, not the GPU's whole bandwidth. `scaleup_gbytes_per_s` stays the per-GPU total, one
direction, over all of a GPU's scale-up links, each link carrying an equal share.

Topologies (simulators/hardware/_topology.py names them):
- `switch`: every GPU on one switch (NVSwitch); any group gets the whole per-GPU rate.
- `full_mesh`: one link per GPU pair, rate / (n - 1) each (AMD xGMI on an 8-GPU baseboard: 7
  links of 64 GB/s; Gaudi 3's 21 RoCE scale-up ports, 3 to each of 7 peers).
- `torus_2d`, `torus_3d`: ranks laid row-major on the torus `dims` (the first dimension varies
  fastest), each GPU linked to its neighbours +-1 in every dimension with wraparound; a
  dimension of size 2 gives one neighbour (one link), of size 1 none (TPU ICI, Trainium2
  NeuronLink). A job smaller than the torus takes the run of ranks 0..n-1 of it.

Share of the per-GPU rate (`scaleup_share`), the model's one assumption about algorithms on such
networks: a collective spreads its traffic over every direct link between members of its group
(RCCL runs several rings over an xGMI mesh at once and its all-to-all is direct; torus
all-reduces run bidirectional rings along every dimension at once), so a member with l links to
other members gets l links' worth; a member with none (its peers are several hops away) still
gets one link's worth, routed through the others; a point-to-point op (send_recv) one link. The
slowest member sets the pace, so the minimum over the group's members counts.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from simulators.hardware._topology import is_torus


def neighbours(topology: str, dims: tuple[int, ...], domain_gpus: int, local: int) -> tuple[int, ...]:
    """Domain-local ranks GPU `local` has a direct scale-up link to (none through a switch)."""
    if topology == "full_mesh":
        return tuple(r for r in range(domain_gpus) if r != local)
    if not is_torus(topology):
        return ()
    coords = np.unravel_index(local, dims, order="F")
    out = set()
    for axis, size in enumerate(dims):
        for step in (-1, 1):
            moved = list(coords)
            moved[axis] = (coords[axis] + step) % size
            peer = int(np.ravel_multi_index(moved, dims, order="F"))
            if peer != local:
                out.add(peer)
    return tuple(sorted(out))


def links_per_gpu(topology: str, dims: tuple[int, ...], domain_gpus: int) -> int:
    """Scale-up links of one GPU (0 through a switch): the per-GPU rate is split over these."""
    return len(neighbours(topology, dims, domain_gpus, 0))


@lru_cache(maxsize=4096)
def _share(topology: str, dims: tuple[int, ...], domain_gpus: int, members: int, stride: int, p2p: bool) -> float:
    total = links_per_gpu(topology, dims, domain_gpus)
    if total == 0 or members < 2:
        return 1.0
    if p2p:
        return 1.0 / total
    group = [m * stride for m in range(members) if m * stride < domain_gpus]
    inside = set(group)
    used = min(sum(p in inside for p in neighbours(topology, dims, domain_gpus, r)) for r in group)
    return max(used, 1) / total


def scaleup_share(
    topology: str, dims: tuple[int, ...], domain_gpus: int, members, stride, point_to_point: bool = False
) -> np.ndarray:
    """Share (0, 1] of the per-GPU scale-up rate a group of `members` GPUs `stride` apart inside
    one domain uses (see the module docstring); 1 through a switch. Broadcasts over arrays."""
    g, k = np.broadcast_arrays(np.asarray(members, dtype=float), np.asarray(stride, dtype=float))
    if topology == "switch":
        return np.ones(g.shape)
    out = np.empty(g.shape)
    for key in set(zip(g.ravel().tolist(), k.ravel().tolist())):
        out[(g == key[0]) & (k == key[1])] = _share(
            topology, tuple(dims), domain_gpus, int(key[0]), int(key[1]), point_to_point
        )
    return out
