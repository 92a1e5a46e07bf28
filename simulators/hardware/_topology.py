"""The scale-up topology names a GPU's catalogue row may take, and their shape rules.

Kept with the catalogue (not with the network models that use them) so a GPU row is validated
at load; simulators/network/_scaleup.py wires and prices them.
"""

from __future__ import annotations

import math

TOPOLOGIES = ("switch", "full_mesh", "torus_2d", "torus_3d")
TORUS_RANK = {"torus_2d": 2, "torus_3d": 3}


def is_torus(topology: str) -> bool:
    """Tori are cabled between hosts (ICI, NeuronLink): a server boundary does not cut them."""
    return topology in TORUS_RANK


def check_topology(topology: str, dims: tuple[int, ...], domain_gpus: int) -> str | None:
    """Why (`topology`, torus `dims`) cannot wire `domain_gpus` GPUs, or None where it can."""
    if topology not in TOPOLOGIES:
        return f"{topology!r} is not a scale-up topology; allowed: {', '.join(TOPOLOGIES)}"
    if not is_torus(topology):
        return None if not dims else f"torus dims {list(dims)} given for {topology}; allowed: none (null)"
    if len(dims) != TORUS_RANK[topology] or any(d < 1 for d in dims):
        return f"{topology} needs {TORUS_RANK[topology]} dims >= 1, got {list(dims)}"
    if math.prod(dims) != domain_gpus:
        return f"torus dims {list(dims)} hold {math.prod(dims)} GPUs, not the domain's {domain_gpus}"
    return None
