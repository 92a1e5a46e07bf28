"""Point-to-point transports that move real bytes between ranks: the interface and TCP.

A transport joins `world` ranks: `open(rank, world)` creates this rank's endpoints and returns its
address (any picklable value), the caller exchanges addresses (a queue, Ray), and
`connect(book)` links every pair. Messages are nonblocking: `isend(peer, buf, imm)` and
`irecv(peer, buf)` post a contiguous uint8 numpy buffer and return a `Request`; `wait()` drives
the transport until it completes and returns the 32-bit immediate the sender attached (the
replay sends each chunk's CRC there). Between a pair, messages match in posting order and sizes
must agree. Because `wait` progresses every posted operation, not only its own, posting a
receive and a send and then waiting on both never deadlocks, whatever the pattern (a ring step
sends to i + 1 while receiving from i - 1; all-to-all pairs i + k with i - k).

Every transport takes `secret`, the per-run key the driver makes (`new_secret`, `_handshake`) and gives to
all ranks; one that accepts connections from the network (TCP) lets in only a peer that proves
it holds the key, as anything that reaches a node's port could otherwise join or abort a run.
"""

from __future__ import annotations

import selectors
import socket
import struct
import sys
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from simulators._errors import SpecError
from simulators.rdma import _handshake as handshake
from simulators.rdma._errors import ReplayError

_HEADER = struct.Struct("<QII")  # payload bytes, immediate, magic
_MAGIC = 0x64736531  # "dse1"


class Request:
    """A posted send or receive; `wait()` returns the immediate (0 for sends)."""

    __slots__ = ("transport", "peer", "nbytes", "done", "imm")

    def __init__(self, transport: Transport, peer: int, nbytes: int) -> None:
        self.transport, self.peer, self.nbytes = transport, peer, nbytes
        self.done, self.imm = False, 0

    def wait(self) -> int:
        if not self.done:
            self.transport.wait(self)
        return self.imm


class Transport(ABC):
    """Moves bytes between the ranks of one replay (contract in the module docstring).

    Subclasses implement open, connect, isend, irecv, wait and close; send, recv, sendrecv and
    barrier are built from those. register/deregister announce a buffer that later messages
    will use (pinned once by RDMA; nothing to do for TCP).
    """

    kind: ClassVar[str]
    rank: int = 0
    world: int = 1

    @abstractmethod
    def open(self, rank: int, world: int) -> Any: ...

    @abstractmethod
    def connect(self, book: Sequence[Any]) -> None: ...

    @abstractmethod
    def isend(self, peer: int, buf: np.ndarray, imm: int = 0) -> Request: ...

    @abstractmethod
    def irecv(self, peer: int, buf: np.ndarray) -> Request: ...

    @abstractmethod
    def wait(self, request: Request) -> None: ...

    @abstractmethod
    def close(self) -> None: ...

    def register(self, buf: np.ndarray) -> None:  # noqa: B027  (optional hook)
        """Announce a buffer that sends and receives will use (views of it included)."""

    def deregister(self, buf: np.ndarray) -> None:  # noqa: B027  (optional hook)
        """Forget a registered buffer."""

    def send(self, peer: int, buf: np.ndarray, imm: int = 0) -> None:
        self.isend(peer, buf, imm).wait()

    def recv(self, peer: int, buf: np.ndarray) -> int:
        return self.irecv(peer, buf).wait()

    def sendrecv(self, dst: int, sbuf: np.ndarray, src: int, rbuf: np.ndarray, imm: int = 0) -> int:
        """Send to `dst` while receiving from `src`; returns the received immediate."""
        rreq = self.irecv(src, rbuf)
        self.isend(dst, sbuf, imm).wait()
        return rreq.wait()

    def _peer_queue(self, queues: dict[int, deque], peer: int) -> deque:
        """This rank's queue of messages with `peer` (a one-line error for a rank it has no link to)."""
        try:
            return queues[peer]
        except KeyError:
            raise ReplayError(
                f"{self.kind}: rank {self.rank}: no connection to rank {peer} (world {self.world})"
            ) from None

    def barrier(self) -> None:
        """Dissemination barrier: ceil(log2 n) rounds of empty messages."""
        empty = np.empty(0, dtype=np.uint8)
        k = 1
        while k < self.world:
            self.sendrecv((self.rank + k) % self.world, empty, (self.rank - k) % self.world, empty)
            k *= 2


def check_buffer(buf: np.ndarray) -> memoryview:
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or buf.ndim != 1 or not buf.flags.c_contiguous:
        raise SpecError(f"buffer: {type(buf).__name__} is not allowed; allowed: contiguous 1-d numpy uint8 arrays")
    return memoryview(buf).cast("B")


class _Op:
    __slots__ = ("req", "view", "pos", "header", "hpos")

    def __init__(self, req: Request, view: memoryview, header: bytearray) -> None:
        self.req, self.view, self.pos, self.header, self.hpos = req, view, 0, header, 0


class TcpTransport(Transport):
    """One TCP connection per pair of ranks, TCP_NODELAY and large socket buffers.

    Sockets are nonblocking and one selector progresses all of them, so a rank reads from its
    left neighbour while writing to its right one. Each message is a 16-byte header (length,
    immediate, magic) and the payload, received straight into the posted buffer. `host` is the
    address this rank listens on and advertises (a node IP on a cluster, loopback locally).

    Connecting is a challenge-response on the run's `secret` (`_handshake`). A connection that
    fails it, or says nothing for `handshake_timeout_s`, is refused with one line on stderr
    (kept in `refused`) and the rank goes on accepting its real peers until `timeout_s`: a port
    scanner neither aborts nor stalls the run. Connections are taken one at a time, so each silent one costs at most
    `handshake_timeout_s`.
    """

    kind = "tcp"

    def __init__(
        self,
        host: str = "127.0.0.1",
        socket_buffer_bytes: int = 4 << 20,
        timeout_s: float = 60.0,
        *,
        secret: bytes,
        handshake_timeout_s: float = 5.0,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < 16:
            raise SpecError("tcp: secret must be at least 16 bytes; allowed: new_secret()")
        self.host, self.buffer_bytes, self.timeout_s = host, int(socket_buffer_bytes), float(timeout_s)
        self.secret, self.handshake_timeout_s = secret, float(handshake_timeout_s)
        self.refused: list[str] = []
        self._listener: socket.socket | None = None
        self._socks: dict[int, socket.socket] = {}
        self._sendq: dict[int, deque[_Op]] = {}
        self._recvq: dict[int, deque[_Op]] = {}
        self._mask: dict[int, int] = {}
        self._sel: selectors.BaseSelector | None = None

    def open(self, rank: int, world: int) -> tuple[str, int]:
        self.rank, self.world = rank, world
        lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._tune(lst)  # accepted sockets inherit the buffer sizes, so the window scale fits
        lst.bind((self.host, 0))
        lst.listen(max(world, 8))
        self._listener = lst
        return self.host, lst.getsockname()[1]

    def connect(self, book: Sequence[tuple[str, int]]) -> None:
        if self._listener is None:
            raise ReplayError("tcp: connect() before open()")
        deadline = time.monotonic() + self.timeout_s
        for peer in range(self.rank):  # connect down, accept up: no pair waits on itself
            sock = self._dial(tuple(book[peer]), deadline)
            sock.settimeout(max(0.1, deadline - time.monotonic()))  # the peer may be busy refusing others
            handshake.dial(sock, self.secret, self.rank, peer)
            self._add(peer, sock)
        while len(self._socks) < self.world - 1:
            self._listener.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                sock, (host, port, *_) = self._listener.accept()
            except TimeoutError:
                refused = f"; refused {len(self.refused)} connections, last: {self.refused[-1]}" if self.refused else ""
                raise ReplayError(
                    f"tcp: rank {self.rank}: peers did not connect within {self.timeout_s:g} s{refused}"
                ) from None
            peer = self._accept_one(sock, f"{host}:{port}")
            if peer is not None:
                self._add(peer, sock)
        self._listener.close()
        self._listener = None
        self._sel = selectors.DefaultSelector()
        for peer, sock in self._socks.items():
            sock.setblocking(False)
            self._mask[peer] = 0

    def isend(self, peer: int, buf: np.ndarray, imm: int = 0) -> Request:
        view = check_buffer(buf)
        req = Request(self, peer, len(view))
        header = bytearray(_HEADER.pack(len(view), imm & 0xFFFFFFFF, _MAGIC))
        self._peer_queue(self._sendq, peer).append(_Op(req, view, header))
        return req

    def irecv(self, peer: int, buf: np.ndarray) -> Request:
        view = check_buffer(buf)
        req = Request(self, peer, len(view))
        self._peer_queue(self._recvq, peer).append(_Op(req, view, bytearray(_HEADER.size)))
        return req

    def wait(self, request: Request) -> None:
        deadline = time.monotonic() + self.timeout_s
        sel = self._sel
        while not request.done:
            self._interest()
            left = deadline - time.monotonic()
            events = sel.select(timeout=max(0.0, left)) if left > 0 else []
            if not events and time.monotonic() >= deadline:
                raise ReplayError(
                    f"tcp: rank {self.rank}: no progress for {self.timeout_s:g} s waiting on "
                    f"{request.nbytes} B with rank {request.peer}"
                )
            for key, mask in events:
                if mask & selectors.EVENT_WRITE:
                    self._write(key.data)
                if mask & selectors.EVENT_READ:
                    self._read(key.data)

    def close(self) -> None:
        if self._sel is not None:
            self._sel.close()
            self._sel = None
        for sock in self._socks.values():
            sock.close()
        self._socks.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    # internals

    def _tune(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.buffer_bytes)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.buffer_bytes)

    def _dial(self, addr: tuple[str, int], deadline: float) -> socket.socket:
        while True:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._tune(sock)
            sock.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                sock.connect(addr)
                return sock
            except OSError as exc:
                sock.close()
                if time.monotonic() >= deadline:
                    raise ReplayError(f"tcp: rank {self.rank}: cannot connect to {addr[0]}:{addr[1]} ({exc})") from None
                time.sleep(0.05)

    def _accept_one(self, sock: socket.socket, where: str) -> int | None:
        """The rank of a peer that passes the handshake, or None: refused in one line, and closed."""
        try:
            return handshake.accept(sock, self.secret, self.rank, self.world, self.handshake_timeout_s)
        except handshake.Refused as why:
            sock.close()
            line = f"tcp: rank {self.rank}: refused a connection from {where}: {why}"
            self.refused.append(line)
            print(line, file=sys.stderr)
            return None

    def _add(self, peer: int, sock: socket.socket) -> None:
        if not 0 <= peer < self.world or peer == self.rank or peer in self._socks:
            raise ReplayError(f"tcp: rank {self.rank}: unexpected hello from rank {peer}")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socks[peer] = sock
        self._sendq[peer], self._recvq[peer] = deque(), deque()

    def _interest(self) -> None:
        """Watch a socket only for what is posted on it, so idle peers cost no wakeups."""
        for peer, sock in self._socks.items():
            mask = (selectors.EVENT_READ if self._recvq[peer] else 0) | (
                selectors.EVENT_WRITE if self._sendq[peer] else 0
            )
            old = self._mask[peer]
            if mask == old:
                continue
            if not mask:
                self._sel.unregister(sock)
            elif not old:
                self._sel.register(sock, mask, peer)
            else:
                self._sel.modify(sock, mask, peer)
            self._mask[peer] = mask

    def _write(self, peer: int) -> None:
        self._progress(peer, self._sendq[peer], self._send_one, "sending to")

    def _read(self, peer: int) -> None:
        self._progress(peer, self._recvq[peer], self._recv_one, "receiving from")

    def _progress(self, peer: int, queue: deque[_Op], move: Callable, doing: str) -> None:
        """Complete the queue's messages in posting order until the socket would block."""
        sock = self._socks[peer]
        try:
            while queue:
                move(sock, peer, queue[0])
                queue.popleft().req.done = True
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            raise ReplayError(f"tcp: rank {self.rank}: {doing} rank {peer} failed ({exc})") from None

    @staticmethod
    def _send_one(sock: socket.socket, peer: int, op: _Op) -> None:
        """Send the rest of op's header, then of its payload (BlockingIOError once the socket is full)."""
        while op.hpos < len(op.header):
            op.hpos += sock.send(memoryview(op.header)[op.hpos :])
        while op.pos < len(op.view):
            op.pos += sock.send(op.view[op.pos :])

    def _recv_one(self, sock: socket.socket, peer: int, op: _Op) -> None:
        """Receive the rest of op's header (checked against the posted size), then of its payload."""
        while op.hpos < _HEADER.size:
            op.hpos += self._recv_into(sock, peer, op, memoryview(op.header)[op.hpos :])
        size, op.req.imm, magic = _HEADER.unpack(op.header)
        if magic != _MAGIC or size != len(op.view):
            raise ReplayError(
                f"tcp: rank {self.rank}: rank {peer} sent {size} B (magic {magic:#x}) where "
                f"{len(op.view)} B were posted"
            )
        while op.pos < len(op.view):
            op.pos += self._recv_into(sock, peer, op, op.view[op.pos :])

    def _recv_into(self, sock: socket.socket, peer: int, op: _Op, view: memoryview) -> int:
        n = sock.recv_into(view)
        if n == 0:
            raise ReplayError(
                f"tcp: rank {self.rank}: rank {peer} closed the connection with {len(op.view) - op.pos} of "
                f"{len(op.view)} B outstanding"
            )
        return n
