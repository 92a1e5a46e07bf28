"""RDMA over pyverbs: `RdmaTransport` (device detection: `_devices`).

pyverbs must match the machine's rdma-core, so it comes from the distribution (Debian:
`apt-get install python3-pyverbs rdma-core ibverbs-providers`, then a venv made with
`--system-site-packages` from the system Python 3.11), never from PyPI. It is imported only
inside `open`, so `import simulators.rdma` works anywhere (STYLE 10).

Protocol (rendezvous, zero copy): each pair of ranks shares one RC queue pair. A receive posts a
24-byte control SEND "ready to receive: address, length, rkey" of the destination buffer; the
sender answers with one RDMA WRITE WITH IMMEDIATE into it, the 32-bit immediate carrying the
chunk's CRC, whose completion at the receiver (it consumes a posted receive) says the bytes have
landed. Buffers are registered once (`register`) as memory regions; one completion queue serves
every queue pair and is polled.
"""

from __future__ import annotations

import importlib
import random
import socket
import struct
import time
from collections import deque
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np

from simulators._errors import SpecError
from simulators.rdma._devices import require_rdma
from simulators.rdma._errors import ReplayError
from simulators.rdma._transport import Request, Transport, check_buffer


def _verbs() -> SimpleNamespace:
    """pyverbs classes and the enum values used here, by name (module layouts differ by release:
    rdma-core 44 has `pyverbs.enums`, later ones `pyverbs.libibverbs_enums`)."""
    from pyverbs.addr import GID, AHAttr, GlobalRoute
    from pyverbs.cq import CQ
    from pyverbs.device import Context
    from pyverbs.mr import MR
    from pyverbs.pd import PD
    from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
    from pyverbs.wr import SGE, RecvWR, SendWR

    mods = []
    for name in ("pyverbs.libibverbs_enums", "pyverbs.enums"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass

    def const(name: str) -> int:
        for mod in mods:
            if hasattr(mod, name):
                return int(getattr(mod, name))
            for obj in vars(mod).values():
                if isinstance(obj, type) and hasattr(obj, name):
                    return int(getattr(obj, name))
        raise ReplayError(f"rdma: pyverbs lacks {name}; allowed: rdma-core 44 or later")

    names = (
        "IBV_QPT_RC IBV_ACCESS_LOCAL_WRITE IBV_ACCESS_REMOTE_WRITE IBV_WR_SEND IBV_WR_RDMA_WRITE_WITH_IMM "
        "IBV_SEND_SIGNALED IBV_WC_SUCCESS IBV_WC_RECV IBV_WC_RECV_RDMA_WITH_IMM"
    ).split()
    return SimpleNamespace(
        GID=GID, AHAttr=AHAttr, GlobalRoute=GlobalRoute, CQ=CQ, Context=Context, MR=MR, PD=PD, QP=QP,
        QPAttr=QPAttr, QPCap=QPCap, QPInitAttr=QPInitAttr, SGE=SGE, RecvWR=RecvWR, SendWR=SendWR,
        **{n: const(n) for n in names},
    )  # fmt: skip


_CTRL = struct.Struct("<QQI4x")  # address, length, rkey of a posted receive buffer
_SLOT = 32
_CTRL_RECV, _CTRL_SEND, _DATA = 0, 1, 2


class RdmaTransport(Transport):
    """RC queue pairs over pyverbs; RDMA WRITE WITH IMMEDIATE into registered buffers.

    device: an RDMA device name (default: the first with an ACTIVE port); port and gid_index
    select the port and its GID (RoCE v2 usually sits at index 1 or 3: see `show_gids`); depth
    bounds the messages in flight per peer. `secret` (the run's key, which every transport
    takes) goes unused: queue pairs accept no connection, they are wired to the queue pair
    numbers the driver's address book names.
    """

    kind = "rdma"

    def __init__(
        self,
        device: str | None = None,
        port: int | None = None,
        gid_index: int = 0,
        depth: int = 32,
        timeout_s: float = 60.0,
        secret: bytes | None = None,
    ) -> None:
        del secret  # see the class docstring
        self.device, self.port, self.gid_index = device, port, int(gid_index)
        self.depth, self.timeout_s = int(depth), float(timeout_s)
        self._v: Any = None
        self._ctx = None
        self._mrs: list[tuple[int, int, Any, np.ndarray]] = []

    def open(self, rank: int, world: int) -> dict[str, Any]:
        v = self._v = _verbs()
        self.rank, self.world = rank, world
        if self.device is None or self.port is None:
            report = require_rdma()
            active = [a for a in report.active_ports if self.device in (None, a[0])]
            if not active:
                raise SpecError(f"device: {self.device!r} has no ACTIVE port; allowed: {report.describe()}")
            self.device, self.port = self.device or active[0][0], self.port or active[0][1]
        self._ctx = v.Context(name=self.device)
        self._pd = v.PD(self._ctx)
        port_attr = self._ctx.query_port(self.port)
        self._mtu = port_attr.active_mtu
        peers = [p for p in range(world) if p != rank]
        self._cq = v.CQ(self._ctx, len(peers) * 4 * self.depth + 64, None, None, 0)
        access = self._access = v.IBV_ACCESS_LOCAL_WRITE | v.IBV_ACCESS_REMOTE_WRITE
        # Control slots: per peer, 2·depth receive slots then depth send slots.
        self._ctrl = np.zeros(world * 3 * self.depth * _SLOT, dtype=np.uint8)
        self._ctrl_mr = v.MR(self._pd, self._ctrl.nbytes, access, address=self._ctrl.ctypes.data)
        self._qps, self._psn, self._qpn_peer = {}, {}, {}
        self._free_slots: dict[int, deque[int]] = {}
        self._rtr: dict[int, deque[tuple[int, int, int]]] = {}
        self._sends: dict[int, deque[tuple[Request, int, int, int, int]]] = {}
        self._recvs: dict[int, deque[Request]] = {}
        self._writes: dict[int, Request] = {}
        self._inflight: dict[int, int] = {}  # RDMA writes posted and not completed, per peer
        self._serial = 0
        cap = v.QPCap(max_send_wr=2 * self.depth, max_recv_wr=2 * self.depth, max_send_sge=1, max_recv_sge=1)
        for peer in peers:
            attr = v.QPAttr(port_num=self.port)
            attr.qp_access_flags = access
            init = v.QPInitAttr(qp_type=v.IBV_QPT_RC, scq=self._cq, rcq=self._cq, cap=cap)
            qp = v.QP(self._pd, init, attr)  # created in INIT: receives can be posted already
            self._qps[peer], self._psn[peer] = qp, random.getrandbits(24)
            self._qpn_peer[qp.qp_num] = peer
            self._free_slots[peer] = deque(range(self.depth))
            self._rtr[peer], self._sends[peer], self._recvs[peer] = deque(), deque(), deque()
            self._inflight[peer] = 0
            for slot in range(2 * self.depth):
                self._post_ctrl_recv(peer, slot)
        gid = self._ctx.query_gid(self.port, self.gid_index)
        return {
            "lid": port_attr.lid,
            "gid": str(gid),
            "qpn": {p: qp.qp_num for p, qp in self._qps.items()},
            "psn": dict(self._psn),
        }

    def connect(self, book: Sequence[dict[str, Any]]) -> None:
        v = self._v
        for peer, qp in self._qps.items():
            remote = book[peer]
            attr = v.QPAttr(port_num=self.port)
            attr.qp_access_flags = self._access
            attr.path_mtu = self._mtu
            attr.dest_qp_num = remote["qpn"][self.rank]
            attr.rq_psn = remote["psn"][self.rank]
            attr.sq_psn = self._psn[peer]
            attr.max_dest_rd_atomic = attr.max_rd_atomic = 1
            # Generous retries: a peer still in INIT drops packets until it reaches RTR.
            attr.min_rnr_timer, attr.timeout, attr.retry_cnt, attr.rnr_retry = 12, 18, 7, 7
            gr = v.GlobalRoute(dgid=v.GID(remote["gid"]), sgid_index=self.gid_index, hop_limit=64)
            attr.ah_attr = v.AHAttr(port_num=self.port, is_global=1, gr=gr, dlid=remote["lid"])
            qp.to_rts(attr)

    def register(self, buf: np.ndarray) -> None:
        check_buffer(buf)
        if buf.nbytes == 0 or self._find(buf) is not None:
            return
        mr = self._v.MR(self._pd, buf.nbytes, self._access, address=buf.ctypes.data)
        self._mrs.append((buf.ctypes.data, buf.ctypes.data + buf.nbytes, mr, buf))

    def deregister(self, buf: np.ndarray) -> None:
        for entry in list(self._mrs):
            if entry[0] == buf.ctypes.data and entry[1] - entry[0] == buf.nbytes:
                entry[2].close()
                self._mrs.remove(entry)

    def isend(self, peer: int, buf: np.ndarray, imm: int = 0) -> Request:
        addr, lkey, _ = self._keys(buf)
        req = Request(self, peer, buf.nbytes)
        self._peer_queue(self._sends, peer).append((req, addr, buf.nbytes, lkey, imm & 0xFFFFFFFF))
        self._pump(peer)
        return req

    def irecv(self, peer: int, buf: np.ndarray) -> Request:
        addr, _, rkey = self._keys(buf)
        req = Request(self, peer, buf.nbytes)
        self._peer_queue(self._recvs, peer).append(req)
        deadline = time.monotonic() + self.timeout_s
        while not self._free_slots[peer]:
            self._poll(deadline, f"a control slot for rank {peer}")
        slot = self._free_slots[peer].popleft()
        off = self._slot_offset(peer, 2 * self.depth + slot)
        self._ctrl[off : off + _CTRL.size] = np.frombuffer(_CTRL.pack(addr, buf.nbytes, rkey), dtype=np.uint8)
        v = self._v
        sge = v.SGE(self._ctrl_mr.buf + off, _CTRL.size, self._ctrl_mr.lkey)
        wr = v.SendWR(wr_id=self._wr_id(peer, slot, _CTRL_SEND), opcode=v.IBV_WR_SEND, num_sge=1, sg=[sge],
                      send_flags=v.IBV_SEND_SIGNALED)  # fmt: skip
        self._qps[peer].post_send(wr, None)
        return req

    def wait(self, request: Request) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not request.done:
            self._poll(deadline, f"{request.nbytes} B with rank {request.peer}")

    def close(self) -> None:
        for _, _, mr, _ in self._mrs:
            mr.close()
        self._mrs.clear()
        if self._ctx is not None:
            self._ctx.close()  # closes its PD, CQ, QPs and MRs
            self._ctx = None

    # internals

    def _find(self, buf: np.ndarray):
        lo = buf.ctypes.data
        for start, end, mr, _ in self._mrs:
            if start <= lo and lo + buf.nbytes <= end:
                return mr
        return None

    def _keys(self, buf: np.ndarray) -> tuple[int, int, int]:
        """(address, lkey, rkey) of a buffer inside a registered region (empty ones use the control region)."""
        check_buffer(buf)
        if buf.nbytes == 0:
            return self._ctrl_mr.buf, self._ctrl_mr.lkey, self._ctrl_mr.rkey
        mr = self._find(buf)
        if mr is None:
            raise ReplayError(
                f"rdma: rank {self.rank}: a {buf.nbytes}-byte buffer is not registered; allowed: views of "
                f"buffers passed to register()"
            )
        return buf.ctypes.data, mr.lkey, mr.rkey

    def _slot_offset(self, peer: int, slot: int) -> int:
        return (peer * 3 * self.depth + slot) * _SLOT

    def _wr_id(self, peer: int, index: int, kind: int) -> int:
        return ((peer << 32 | index) << 2) | kind

    def _post_ctrl_recv(self, peer: int, slot: int) -> None:
        v = self._v
        off = self._slot_offset(peer, slot)
        sge = v.SGE(self._ctrl_mr.buf + off, _SLOT, self._ctrl_mr.lkey)
        self._qps[peer].post_recv(v.RecvWR(wr_id=self._wr_id(peer, slot, _CTRL_RECV), num_sge=1, sg=[sge]), None)

    def _pump(self, peer: int) -> None:
        """Answer each 'ready to receive' with the next pending send, in order, at most `depth`
        writes in flight per peer (the send queue holds 2·depth: writes and control sends)."""
        v = self._v
        sends, rtrs = self._sends[peer], self._rtr[peer]
        while sends and rtrs and self._inflight[peer] < self.depth:
            req, addr, nbytes, lkey, imm = sends.popleft()
            raddr, rlen, rkey = rtrs.popleft()
            if rlen != nbytes:
                raise ReplayError(f"rdma: rank {self.rank}: rank {peer} posted {rlen} B where {nbytes} B are sent")
            self._serial = (self._serial + 1) & 0xFFFFFFFF
            self._writes[self._serial] = req
            self._inflight[peer] += 1
            sge = v.SGE(addr, nbytes, lkey)
            wr = v.SendWR(wr_id=self._wr_id(peer, self._serial, _DATA),
                          opcode=v.IBV_WR_RDMA_WRITE_WITH_IMM, num_sge=1, sg=[sge],
                          send_flags=v.IBV_SEND_SIGNALED)  # fmt: skip
            wr.imm_data = socket.htonl(imm)
            wr.set_wr_rdma(rkey, raddr)
            self._qps[peer].post_send(wr, None)

    def _poll(self, deadline: float, what: str) -> None:
        v = self._v
        _, wcs = self._cq.poll(16)
        if not wcs:
            if time.monotonic() > deadline:
                raise ReplayError(f"rdma: rank {self.rank}: no completion for {self.timeout_s:g} s waiting on {what}")
            return
        for wc in wcs:
            kind, index, peer = wc.wr_id & 3, (wc.wr_id >> 2) & 0xFFFFFFFF, wc.wr_id >> 34
            if wc.status != v.IBV_WC_SUCCESS:
                raise ReplayError(
                    f"rdma: rank {self.rank}: completion status {wc.status} (vendor error {wc.vendor_err}) "
                    f"on a {('receive', 'control send', 'RDMA write')[kind]} with rank {peer}"
                )
            if kind == _CTRL_SEND:
                self._free_slots[peer].append(index)
            elif kind == _DATA:
                self._writes.pop(index).done = True
                self._inflight[peer] -= 1
                self._pump(peer)
            elif wc.opcode == v.IBV_WC_RECV_RDMA_WITH_IMM:
                req = self._recvs[peer].popleft()
                if wc.byte_len != req.nbytes:
                    raise ReplayError(
                        f"rdma: rank {self.rank}: {wc.byte_len} B from rank {peer}, {req.nbytes} expected"
                    )
                req.imm, req.done = socket.ntohl(wc.imm_data), True
                self._post_ctrl_recv(peer, index)
            else:  # IBV_WC_RECV: a control message
                off = self._slot_offset(peer, index)
                self._rtr[peer].append(_CTRL.unpack(self._ctrl[off : off + _CTRL.size].tobytes()))
                self._post_ctrl_recv(peer, index)
                self._pump(peer)
