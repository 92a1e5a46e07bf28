"""Network fidelity levels, cheapest first (analytical, flow, packet): each re-prices a training
candidate's collectives on its fabric as congestion factors."""

from simulators.fidelity import _analytical, _flow, _packet  # noqa: F401  (each registers its level)
from simulators.fidelity._level import LEVELS, NetworkLevel, SimulatedLevel, register

__all__ = ["LEVELS", "NetworkLevel", "SimulatedLevel", "register"]
