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
from simulators.packet._engine import (
    GO_BACK_N,
    NO_RECOVERY,
    PS_PER_S,
    SELECTIVE_REPEAT,
    Fabric,
    Flows,
    Links,
    simulate_packets,
)
from simulators.packet._faults import LinkFaults, Routes

# RoceSettings.loss_recovery: what the receiving NIC keeps and the sending NIC resends
RECOVERY = {"none": NO_RECOVERY, "go_back_n": GO_BACK_N, "selective_repeat": SELECTIVE_REPEAT}
# The InfiniBand/RoCE local ACK timeout is 4.096 us x 2^exponent (the IB spec; Linux qib driver
# comment); HCCL_RDMA_TIMEOUT (Huawei CANN docs) sets the exponent to 20 by default: 4.29 s.
# NCCL_IB_TIMEOUT sets the same exponent; its default was not checked here.
DEFAULT_RTO_S = 4.096e-6 * 2**20


@dataclass(frozen=True)
class RoceSettings:
    """PFC, ECN and congestion control (../shared/reference/netsim.md section 1). PFC XOFF/XON
    per ingress port at 15 and 12 packets of 4 KB (htsim's thresholds) in a 32 MB shared buffer
    (SimAI, HPCC). ECN from the DCQCN paper's column (SIGCOMM'15; marked unverified there): Kmin
    5 KB, Kmax 200 KB, Pmax 1 %. `congestion_control` names a registered algorithm
    (simulators.packet.CONGESTION_CONTROLS); `congestion_params` its parameters: None for its
    defaults, a mapping of fields to override, or its parameter dataclass (a mapping is held as
    the latter).

    Loss: a switch drops what its shared buffer cannot hold (PFC normally prevents it), and each
    link loses a frame with chance `loss_rate` (data and control frames alike). `loss_recovery`
    is the NICs' answer: `go_back_n` (RoCE's reliable connection: the receiver keeps only the
    next packet in order, answers the first gap with a NAK, and the sender resends from there),
    `selective_repeat` (newer NICs: the receiver keeps every packet, the sender resends only
    the ones NAKed) or `none` (a lost packet stays lost and its flow never completes, the ns-3
    UDP case). Either way, no cumulative ACK progress for `retransmit_timeout_s` resends from
    the first unacknowledged packet, and after `retries` such timeouts in a row the flow fails
    (NCCL's "transport retry counter exceeded"). Recovery needs ACKs. Unset, it is what the
    NICs do: `none` without ACKs, `selective_repeat` under adaptive routing (a SuperNIC placing
    packets out of order), `go_back_n` otherwise. The receiver NAKs a gap once it holds a packet
    `reorder_packets` beyond it; unset, 1 (at once), or 64 under adaptive routing (this model's
    allowance for the reordering of equal paths, not a published NIC figure).

    `adaptive_routing`: each switch sends a packet to the least-queued of the equal-cost next
    hops towards its receiver (per-packet load balancing, as Spectrum-X and InfiniBand adaptive
    routing do) where ECMP hashes a flow onto one path. Packets then arrive out of order, so it
    needs a receiver that places them so (`selective_repeat`, or `none`), with a
    `reorder_packets` above the reordering the paths cause."""

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
    loss_rate: float = 0.0
    loss_recovery: str | None = None  # None: the NICs' own (docstring)
    retransmit_timeout_s: float = DEFAULT_RTO_S
    retries: int = 7  # NCCL_IB_RETRY_CNT's default
    reorder_packets: int | None = None  # None: 1, or 64 under adaptive routing
    adaptive_routing: bool = False

    def __post_init__(self) -> None:
        recovery = self.recovery()
        if recovery not in RECOVERY:
            raise SpecError(f"loss_recovery: {recovery!r} is not allowed; allowed: {', '.join(RECOVERY)}")
        if recovery != "none" and not self.acks:
            raise SpecError(
                f"loss_recovery: {recovery!r} needs acks: true (the sender learns what arrived from ACKs); "
                "allowed with acks: false: none"
            )
        if not 0.0 <= self.loss_rate < 1.0:
            raise SpecError(f"loss_rate: {self.loss_rate!r} is not allowed; allowed: 0 <= loss_rate < 1")
        if self.adaptive_routing and recovery == "go_back_n":
            raise SpecError(
                "loss_recovery: 'go_back_n' discards the packets adaptive routing reorders; "
                "allowed with adaptive_routing: selective_repeat, none"
            )
        if not isinstance(self.reorder(), int) or self.reorder() < 1:
            raise SpecError(f"reorder_packets: {self.reorder_packets!r} is not allowed; allowed: a whole number >= 1")
        if not isinstance(self.retries, int) or not 0 <= self.retries <= 7:
            raise SpecError(f"retries: {self.retries!r} is not allowed; allowed: 0 to 7 (a 3-bit field in RoCE)")
        if not 1e-12 <= self.retransmit_timeout_s < 1e3:
            raise SpecError(
                f"retransmit_timeout_s: {self.retransmit_timeout_s!r} is not allowed; "
                "allowed: 1e-12 (a picosecond) to 1000"
            )
        entry = get(self.congestion_control)
        object.__setattr__(self, "congestion_control", entry.name)
        if entry.acks and not self.acks:
            name = entry.name
            raise SpecError(
                f"acks: False is not allowed with congestion_control {name!r}, which reads ACKs; allowed: True"
            )
        if self.congestion_params is not None:  # None stays None: replace() may change the algorithm
            object.__setattr__(self, "congestion_params", entry.make_params(self.congestion_params))

    def recovery(self) -> str:
        """The loss recovery: the one given, or the NICs' own (class docstring)."""
        if self.loss_recovery is not None:
            return self.loss_recovery
        return "none" if not self.acks else "selective_repeat" if self.adaptive_routing else "go_back_n"

    def reorder(self) -> int:
        """How far beyond a gap a packet must be for the receiver to NAK it (class docstring)."""
        if self.reorder_packets is not None:
            return self.reorder_packets
        return 64 if self.adaptive_routing else 1

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
    drops: np.ndarray  # per link: packets its switch's full buffer dropped
    lost: np.ndarray  # per link: frames lost on the wire (loss_rate, a link down)
    retransmits: np.ndarray  # per flow: data packets sent again
    timeouts: np.ndarray  # per flow: retransmission timeouts
    failed: np.ndarray  # per flow: gave up after `retries` timeouts in a row (NCCL's fatal error)
    cnps: np.ndarray
    marked_packets: np.ndarray
    window_bytes: np.ndarray  # bytes each flow delivered within the requested window
    events: int
    end_s: float
    link_gbps: np.ndarray = field(repr=False)
    cc_state: np.ndarray = field(repr=False)  # each flow's congestion-control row at the end (_congestion.py)


def _reverse_paths(links: Sequence[Link], routes: Routes, needed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each route's path back, receiver to sender (for ACKs): for every link of the path, the
    link joining the same nodes the other way (of parallel ones, the nearest in the list, which
    is its twin when links are built in pairs)."""
    if not needed:
        return np.zeros(len(routes.path_start), np.int64), np.zeros(0, np.int64)
    by_ends: dict[tuple[int, int], list[int]] = {}
    for i, link in enumerate(links):
        by_ends.setdefault((link.src, link.dst), []).append(i)
    twin = np.array(
        [min(by_ends.get((link.dst, link.src), [-1]), key=lambda j: abs(j - i)) for i, link in enumerate(links)],
        np.int64,
    )
    start, lengths = routes.path_start, np.diff(routes.path_start)
    ends = np.repeat(start[:-1] + start[1:] - 1, lengths)  # position p of a path [a, b) reads a + b - 1 - p
    forward = routes.path_links[ends - np.arange(len(routes.path_links))]
    back = twin[forward]
    missing = np.flatnonzero(back < 0)
    if len(missing):
        n = int(np.searchsorted(start, missing[0], side="right") - 1)
        raise SpecError(
            f"flows[{n}]: link {forward[missing[0]]} has no link back for ACKs; give one or set RoceSettings.acks=False"
        )
    return start.copy(), back


def _check_int_hops(routes: Routes, name: str) -> None:
    """Telemetry is recorded at each switch egress of a path, into at most MAX_INT_HOPS slots."""
    switches = np.diff(routes.path_start) - 1
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
    faults: LinkFaults | None = None,
) -> PacketResult:
    """Run `flows` (Flow values, or arrays from simulators.network.collective_flows) over
    `links`; nodes in `switches` have the shared buffer, PFC and ECN. `window_s` (start,
    end): also count the bytes each flow delivers in that interval (rates). `faults`: links
    that lose frames, links and switches that fail, and the routes around them (LinkFaults)."""
    arrays = flow_arrays(links, flows)
    faults = faults or LinkFaults()
    down = faults.down_ps(links)
    routes = faults.routes(links, arrays, switches, down, roce.adaptive_routing)
    cc = get(roce.congestion_control)
    if cc.telemetry:
        _check_int_hops(routes, cc.name)
    engine_flows = Flows(
        arrays.nbytes,
        arrays.mtu,
        arrays.start_ps,
        arrays.gap_ps,
        routes.path_start,
        routes.path_links,
        arrays.dep_count,
        arrays.dependents_start,
        arrays.dependents,
        *_reverse_paths(links, routes, roce.acks),
        routes.route_start,
        routes.route_list,
        routes.route_from_ps,
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
        *faults.link_arrays(links, roce.loss_rate, down),
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
        RECOVERY[roce.recovery()],
        round(roce.retransmit_timeout_s * to_ps),
        int(roce.retries),
        int(roce.reorder()),
        bool(roce.adaptive_routing),
    )
    params = np.ascontiguousarray(roce.control_params().vector(), np.float64)
    out = simulate_packets(engine_links, engine_flows, fabric, params, cc.columns, cc.hooks())
    begin, finish, link_bytes, q_max, pauses, drops, lost, retransmits, timeouts, failed = out[:10]
    cnps, marked, window_bytes, events, end, cc_state = out[10:]
    unfinished = int((finish < 0).sum())
    if unfinished and not (drops.sum() + lost.sum()):
        raise SpecError(f"flows: {unfinished} never completed (a dependency cycle?)")
    return PacketResult(
        begin / to_ps,
        np.where(finish >= 0, finish / to_ps, np.nan),
        link_bytes,
        q_max,
        pauses,
        drops,
        lost,
        retransmits,
        timeouts,
        failed,
        cnps,
        marked,
        window_bytes,
        int(events),
        end / to_ps,
        rates / 1e9,
        cc_state,
    )
