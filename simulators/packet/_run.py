"""A packet-level run from plain values: links, flows with paths and dependencies
(simulators.network.Link, Flow), RoCE settings.

`RoceSettings` the PFC and ECN parameters (defaults from
../shared/reference/netsim.md section 1, every one settable) and the congestion control algorithm
by name (_congestion.py) with its parameters; `simulate` runs the compiled engine and returns
per-flow times and per-link statistics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulators._errors import SpecError
from simulators.network import Flow, FlowArrays, Link
from simulators.network._transfers import RunTimes, flow_arrays
from simulators.packet._congestion import MAX_INT_HOPS, Params, get
from simulators.packet._engine import PS_PER_S, Fabric, Flows, Links, simulate_packets


@dataclass(frozen=True)
class RoceSettings:
    """PFC, ECN and congestion control (../shared/reference/netsim.md section 1). PFC XOFF/XON
    per ingress port at 15 and 12 packets of 4 KB (htsim's thresholds) in a 32 MB shared buffer
    (SimAI, HPCC). ECN from the DCQCN paper's column (SIGCOMM'15; marked unverified there): Kmin
    5 KB, Kmax 200 KB, Pmax 1 %. `congestion_control` names a registered algorithm
    (simulators.packet.CONGESTION_CONTROLS); `congestion_params` its parameters: None for its
    defaults, a mapping of fields to override, or its parameter dataclass (a mapping is held as
    the latter)."""

    buffer_bytes: int = 32 * 2**20
    pfc: bool = True
    pfc_xoff_bytes: int = 15 * 4096
    pfc_xon_bytes: int = 12 * 4096
    ecn: bool = True
    kmin_bytes: int = 5_000
    kmax_bytes: int = 200_000
    pmax: float = 0.01
    congestion_control: str = "dcqcn"
    congestion_params: Params | Mapping[str, Any] | None = None
    acks: bool = True  # per-packet 64-byte ACKs back along the reverse path (CNPs ride on them)
    seed: int = 0

    def __post_init__(self) -> None:
        entry = get(self.congestion_control)
        object.__setattr__(self, "congestion_control", entry.name)
        if entry.acks and not self.acks:
            name = entry.name
            raise SpecError(
                f"acks: False is not allowed with congestion_control {name!r}, which reads ACKs; allowed: True"
            )
        if self.congestion_params is not None:  # None stays None: replace() may change the algorithm
            object.__setattr__(self, "congestion_params", entry.make_params(self.congestion_params))

    def control_params(self) -> Params:
        """The congestion control's parameters: those given, or the algorithm's defaults."""
        return get(self.congestion_control).make_params(self.congestion_params)

    @classmethod
    def line_rate(cls, buffer_bytes: int = 1 << 62) -> RoceSettings:
        """No congestion control, no PFC, no ECN, unlimited buffers: the ns-3 UDP reference case."""
        return cls(buffer_bytes=buffer_bytes, pfc=False, ecn=False, congestion_control="none", acks=False)


@dataclass(frozen=True)
class PacketResult(RunTimes):
    """Seconds per flow (start, finish, completion time) and statistics per link."""

    start_s: np.ndarray
    finish_s: np.ndarray
    link_bytes: np.ndarray
    queue_max_bytes: np.ndarray
    pause_frames: np.ndarray
    drops: np.ndarray
    cnps: np.ndarray
    marked_packets: np.ndarray
    window_bytes: np.ndarray  # bytes each flow delivered within the requested window
    events: int
    end_s: float
    link_gbps: np.ndarray = field(repr=False)
    cc_state: np.ndarray = field(repr=False)  # each flow's congestion-control row at the end (_congestion.py)


def _reverse_paths(links: Sequence[Link], flows: FlowArrays, needed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each flow's path back, receiver to sender (for ACKs): for every link of the path, the
    link joining the same nodes the other way (of parallel ones, the nearest in the list, which
    is its twin when links are built in pairs)."""
    if not needed:
        return np.zeros(flows.count + 1, np.int64), np.zeros(0, np.int64)
    by_ends: dict[tuple[int, int], list[int]] = {}
    for i, link in enumerate(links):
        by_ends.setdefault((link.src, link.dst), []).append(i)
    twin = np.array(
        [min(by_ends.get((link.dst, link.src), [-1]), key=lambda j: abs(j - i)) for i, link in enumerate(links)],
        np.int64,
    )
    start, lengths = flows.path_start, np.diff(flows.path_start)
    ends = np.repeat(start[:-1] + start[1:] - 1, lengths)  # position p of a path [a, b) reads a + b - 1 - p
    forward = flows.path_links[ends - np.arange(len(flows.path_links))]
    back = twin[forward]
    missing = np.flatnonzero(back < 0)
    if len(missing):
        n = int(np.searchsorted(start, missing[0], side="right") - 1)
        raise SpecError(
            f"flows[{n}]: link {forward[missing[0]]} has no link back for ACKs; give one or set RoceSettings.acks=False"
        )
    return start.copy(), back


def _check_int_hops(flows: FlowArrays, name: str) -> None:
    """Telemetry is recorded at each switch egress of a path, into at most MAX_INT_HOPS slots."""
    switches = np.diff(flows.path_start) - 1
    if len(switches) and switches.max() > MAX_INT_HOPS:
        n = int(np.argmax(switches))
        raise SpecError(
            f"flows[{n}]: a path through {switches[n]} switches is not allowed with {name!r}'s in-band "
            f"telemetry; allowed: at most {MAX_INT_HOPS} (ns-3 HPCC's IntHeader::maxHop)"
        )


def _ints(values: list[int]) -> np.ndarray:
    return np.array(values, np.int64)


def simulate(
    links: Sequence[Link],
    flows: Sequence[Flow] | FlowArrays,
    roce: RoceSettings,
    switches: set[int],
    window_s: tuple[float, float] = (0.0, 0.0),
) -> PacketResult:
    """Run `flows` (Flow values, or arrays from simulators.network.collective_flows) over
    `links`; nodes in `switches` have the shared buffer, PFC and ECN. `window_s` (start,
    end): also count the bytes each flow delivers in that interval (rates)."""
    arrays = flow_arrays(links, flows)
    cc = get(roce.congestion_control)
    if cc.telemetry:
        _check_int_hops(arrays, cc.name)
    engine_flows = Flows(
        *(getattr(arrays, name) for name in Flows._fields[:-2]), *_reverse_paths(links, arrays, roce.acks)
    )
    n_nodes = 1 + max(max(link.src, link.dst) for link in links)
    rates = np.array([link.gbps * 1e9 for link in links])
    to_ps = PS_PER_S
    engine_links = Links(
        rates,
        _ints([round(link.delay_s * to_ps) for link in links]),
        _ints([link.dst for link in links]),
        np.full(len(links), roce.pfc_xoff_bytes, np.int64),
        np.full(len(links), roce.pfc_xon_bytes, np.int64),
    )
    fabric = Fabric(
        n_nodes,
        min(roce.buffer_bytes, 1 << 62),
        bool(roce.pfc),
        bool(roce.ecn),
        int(roce.kmin_bytes),
        int(roce.kmax_bytes),
        float(roce.pmax),
        bool(roce.acks),
        bool(cc.telemetry),
        int(roce.seed),
        round(window_s[0] * to_ps),
        round(window_s[1] * to_ps),
    )
    params = np.ascontiguousarray(roce.control_params().vector(), np.float64)
    out = simulate_packets(engine_links, engine_flows, fabric, params, cc.columns, cc.hooks())
    begin, finish, link_bytes, q_max, pauses, drops, cnps, marked, window_bytes, events, end, cc_state = out
    unfinished = int((finish < 0).sum())
    if unfinished and not drops.sum():
        raise SpecError(f"flows: {unfinished} never completed (a dependency cycle?)")
    return PacketResult(
        begin / to_ps,
        np.where(finish >= 0, finish / to_ps, np.nan),
        link_bytes,
        q_max,
        pauses,
        drops,
        cnps,
        marked,
        window_bytes,
        int(events),
        end / to_ps,
        rates / 1e9,
        cc_state,
    )
