"""Congestion control at the sender: the interface, and the registry of algorithms by name.

Why: the packet engine (_engine.py) knows no algorithm. It keeps one row of float64 state per
flow, paces each flow at the rate that row holds and calls the algorithm's compiled hooks at
five moments; a new algorithm is one file defining its parameters and hooks beside a `register`
call (or a `register` call at run time), and nothing compares algorithm names.

The row of flow f, `state[f]`, starts with the columns every algorithm shares, then the
algorithm's own `columns` from OWN on. Times are integer picoseconds held exactly in float64
(below 2^53 ps, 2.5 hours). Shared columns:
  RATE         b/s the flow is paced at; hooks keep it within [params.floor_bps(LINE), LINE];
  LINE         the rate of the flow's first link (set by the engine);
  TIMER        the time in ps from which `on_timer` is due (+inf: never);
  WINDOW       bytes the flow may have in flight (sent, not yet acknowledged): at that many the
               sender stops, and an ACK that brings it below resumes it (+inf, the start
               value: no window; a finite one needs ACKs);
  BASE_RTT_PS  an MTU packet's round trip on the empty path: serialised and propagated on each
               link, its 64-byte ACK back the same way (set by the engine);
  RTT_PS       the round trip the ACK being handled measured: from when the sender's NIC began
               sending its data packet (the time the packet carries and its ACK echoes, as a
               NIC's hardware timestamps do for TIMELY) to the ACK's arrival;
  INT_HOPS     how many hops of in-band telemetry that ACK carries, then at INT + 4 i for hop
               i (the i-th link out of a switch on the path) INT_QLEN, INT_TX_BYTES, INT_TS_PS,
               INT_RATE_BPS: when that egress dequeued the data packet to send it, the bytes
               left queued behind it, the link's cumulative bytes sent (it included), the
               time, and the link's rate. Written only for an algorithm with `telemetry` (the
               engine pays for it only then), on paths of at most MAX_INT_HOPS switches (ns-3
               HPCC's IntHeader::maxHop; a longer path is a one-line SpecError).
The engine writes RTT_PS and the telemetry into the row just before it calls `on_ack`.

Hooks, each `numba.njit(cache=True)` of (state, params, flow, now_ps), `params` the entry's
parameter vector (`Params.vector()`):
  on_start   the flow starts (RATE = LINE, TIMER = WINDOW = inf): set up the row;
  on_timer   at a send from TIMER on (timers take effect when the sender next acts, which is
             the same as firing them on time: nothing reads the rate in between);
  on_marked  -> bool: an ECN-marked data packet reached the receiver; True sends a CNP back
             (riding on its ACK with RoceSettings.acks, else after the reverse path's latency);
  on_cnp     a CNP reached the sender;
  on_ack     an ACK without a CNP reached the sender (only with RoceSettings.acks).
They reach the engine as first-class function values of one signature each (HOOK, MARK), so
the engine is compiled, and cached on disk, once for every algorithm, a hook being called
through its address (measured against DCQCN written into the engine: no slower).

Traits: `acks` (the algorithm learns from ACKs: RoceSettings refuses acks=False with it, in one
line, rather than switching them on behind the caller's back, since ACKs are traffic the run
then carries) and `telemetry` (it reads INT; implies `acks`). Helpers shared by several
algorithms live here (`after_update`, `nothing`, `no_cnp`); like the shared columns, after
changing them delete simulators/packet/__pycache__ (numba caches a hook keyed on its own file).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numba
import numpy as np
from numba import types

from simulators._errors import SpecError
from simulators._registry import Registry

# columns of a flow's state row every algorithm shares (module docstring)
RATE, LINE, TIMER, WINDOW, BASE_RTT_PS, RTT_PS, INT_HOPS, INT = range(8)
INT_QLEN, INT_TX_BYTES, INT_TS_PS, INT_RATE_BPS = range(4)  # offsets within a hop's four
MAX_INT_HOPS = 5
OWN = INT + 4 * MAX_INT_HOPS

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

    def utilisation_target(self) -> float:
        """The share of its bottleneck a lone flow settles at: 1, but for an algorithm that
        keeps headroom on every link by design (HPCC's eta)."""
        return 1.0

    def check(self, checks: Mapping[str, tuple[bool, str]]) -> None:
        """For `__post_init__`: {field: (ok, what is allowed)}; the first field not ok raises."""
        for name, (ok, allowed) in checks.items():
            if not ok:
                raise SpecError(f"congestion_params.{name}: {getattr(self, name)!r} is not allowed; allowed: {allowed}")


class RateFloor(Params):
    """Parameters whose `min_rate_gbps` field is the floor (DCQCN, TIMELY, HPCC): a flow is
    never paced below it, nor above its first link."""

    min_rate_gbps: float

    def floor_bps(self, line_bps: float) -> float:
        return min(self.min_rate_gbps * 1e9, line_bps)


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
    acks: bool = False  # it learns from ACKs (RTT samples, telemetry, a window)
    telemetry: bool = False  # it reads in-band telemetry from ACKs (implies acks)

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
    if entry.telemetry and not entry.acks:
        raise SpecError(f"congestion control {entry.name!r}: telemetry without acks; allowed: acks=True with it")
    asdict(entry.params())  # the defaults must be valid, and a dataclass
    CONGESTION_CONTROLS.register(entry.name, entry, entry.aliases)
    return entry


def get(name: str, field: str = "congestion_control") -> CongestionControl:
    """The registered algorithm `name`; a CatalogError naming `field` and the allowed names."""
    return CONGESTION_CONTROLS.lookup(name, field)


@numba.njit(cache=True)
def after_update(state, flow, column, now_ps):  # pragma: no cover - compiled
    """True once per round trip: when the ACK being handled is for a packet sent after the time
    in `column` (the last update), which it then sets to now. The rule of the HPCC authors' ns-3
    code for HPCC and TIMELY (update when the ACK passes the sequence number sent at the last
    update), read from send times: a flow sends in order, so the two agree."""
    if now_ps - state[flow, RTT_PS] > state[flow, column]:
        state[flow, column] = now_ps
        return True
    return False


@numba.njit(cache=True)
def nothing(state, params, flow, now_ps):  # pragma: no cover - compiled
    """The hook for a moment an algorithm ignores."""


@numba.njit(cache=True)
def no_cnp(state, params, flow, now_ps):  # pragma: no cover - compiled
    """`on_marked` of an algorithm that sends no CNPs."""
    return False
