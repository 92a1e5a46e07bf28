"""Congestion control at the sender: the interface, and the registry of algorithms by name.

Why: the packet engine (_engine.py) knows no algorithm. It keeps one row of float64 state per
flow, paces each flow at the rate that row holds and calls the algorithm's compiled hooks at
five moments; a new algorithm is one file defining its parameters and hooks beside a `register`
call (or a `register` call at run time), and nothing compares algorithm names.

The row of flow f, `state[f]`: RATE (b/s the flow is paced at; hooks keep it within
[params.floor_bps(LINE), LINE]), LINE (the rate of the flow's first link, set by the engine),
TIMER (the time in ps from which `on_timer` is due; +inf: never), then the algorithm's own
`columns` from OWN on. Times are integer picoseconds held exactly in float64 (below 2^53 ps,
2.5 hours).

Hooks, each `numba.njit(cache=True)` of (state, params, flow, now_ps), `params` the entry's
parameter vector (`Params.vector()`):
  on_start   the flow starts (RATE = LINE, TIMER = inf): set up the row;
  on_timer   at a send from TIMER on (timers take effect when the sender next acts, which is
             the same as firing them on time: nothing reads the rate in between);
  on_marked  -> bool: an ECN-marked data packet reached the receiver; True sends a CNP back
             (riding on its ACK with RoceSettings.acks, else after the reverse path's latency);
  on_cnp     a CNP reached the sender;
  on_ack     an ACK without a CNP reached the sender (only with RoceSettings.acks).
They reach the engine as first-class function values of one signature each (HOOK, MARK), so
the engine is compiled, and cached on disk, once for every algorithm, a hook being called
through its address (measured against DCQCN written into the engine: no slower).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
from numba import types

from simulators._errors import SpecError
from simulators._registry import Registry

RATE, LINE, TIMER, OWN = 0, 1, 2, 3  # columns of a flow's state row every algorithm shares

_ARGS = (types.float64[:, ::1], types.float64[::1], types.int64, types.int64)
HOOK = types.FunctionType(types.void(*_ARGS))
MARK = types.FunctionType(types.boolean(*_ARGS))


class Params(ABC):
    """Base of an algorithm's parameters: a frozen dataclass that checks its fields in
    `__post_init__` (naming the field and what is allowed)."""

    @abstractmethod
    def vector(self) -> np.ndarray:
        """The float64 values the hooks read, in the order they index them (SI units, ps)."""

    @abstractmethod
    def floor_bps(self, line_bps: float) -> float:
        """The lowest rate the algorithm may set a flow of first link `line_bps` to."""


@dataclass(frozen=True)
class CongestionControl:
    """One algorithm: its name, parameter type (defaults = the documented values), number of
    own state columns and compiled hooks (module docstring)."""

    name: str
    params: type[Params]
    columns: int
    on_start: Any
    on_timer: Any
    on_marked: Any
    on_cnp: Any
    on_ack: Any
    aliases: tuple[str, ...] = ()

    def hooks(self) -> tuple[Any, ...]:
        return self.on_start, self.on_timer, self.on_marked, self.on_cnp, self.on_ack

    def make_params(self, given: Params | Mapping[str, Any] | None) -> Params:
        """`given` as this algorithm's parameters: None (the defaults), a mapping of field
        overrides, or an instance of its parameter type."""
        if given is None:
            return self.params()
        if isinstance(given, self.params):
            return given
        if not isinstance(given, Mapping):
            raise SpecError(
                f"congestion_params: {type(given).__name__} is not allowed for {self.name!r}; "
                f"allowed: None, a mapping of its fields or {self.params.__name__}"
            )
        allowed = [f.name for f in fields(self.params)]
        unknown = [k for k in given if k not in allowed]
        if unknown:
            known = ", ".join(allowed) or "(it has none)"
            raise SpecError(f"congestion_params.{unknown[0]}: not a parameter of {self.name!r}; allowed: {known}")
        return self.params(**given)


CONGESTION_CONTROLS: Registry[CongestionControl] = Registry("congestion control")


def register(entry: CongestionControl) -> CongestionControl:
    """Add `entry` to CONGESTION_CONTROLS (each algorithm's module calls this beside it)."""
    if not isinstance(entry.columns, int) or entry.columns < 0:
        raise SpecError(f"congestion control {entry.name!r}: columns: {entry.columns!r}; allowed: an int >= 0")
    asdict(entry.params())  # the defaults must be valid, and a dataclass
    CONGESTION_CONTROLS.register(entry.name, entry, entry.aliases)
    return entry


def get(name: str, field: str = "congestion_control") -> CongestionControl:
    """The registered algorithm `name`; a CatalogError naming `field` and the allowed names."""
    return CONGESTION_CONTROLS.lookup(name, field)
