"""How two TCP ranks of one replay make sure of each other before any byte of data moves.

A rank's port is open to whatever reaches its node, so a stranger (a port scanner, a stale rank
of another run) could otherwise take a peer's place or abort the run with a malformed hello.
The driver makes a secret per run (`new_secret`) and gives it to every rank; on each connection
the accepting rank sends a nonce, the dialling rank answers with its rank and
HMAC-SHA256(secret, "hello", nonce, both ranks), and the acceptor answers with its own
HMAC(secret, "ack", ...), so each side knows the other holds the secret and the nonce makes an
overheard hello useless for another connection.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import socket
import struct

from simulators.rdma._errors import ReplayError

_MAGIC = 0x64736568  # "dseh"
_CHALLENGE = struct.Struct("<I16s")  # magic, nonce: what the accepting rank sends first
_HELLO = struct.Struct("<I32s")  # the dialling rank, its HMAC
_ACK = 32  # the accepting rank's HMAC


class Refused(Exception):
    """The connection did not prove it belongs to the run; the message says why."""


def new_secret() -> bytes:
    """A fresh per-run key for the ranks' handshakes (made by the driver, passed to every rank)."""
    return secrets.token_bytes(32)


def _mac(secret: bytes, label: bytes, nonce: bytes, dialler: int, acceptor: int) -> bytes:
    return hmac.new(secret, label + nonce + struct.pack("<II", dialler, acceptor), hashlib.sha256).digest()


def dial(sock: socket.socket, secret: bytes, rank: int, peer: int) -> None:
    """Dialler's side, on a connected socket with its timeout set: answer the challenge and check
    the acceptor's answer; ReplayError where the other end is not the run's rank `peer`."""
    ack = b""
    try:
        magic, nonce = _CHALLENGE.unpack(recv_exact(sock, _CHALLENGE.size))
        if magic == _MAGIC:
            sock.sendall(_HELLO.pack(rank, _mac(secret, b"hello", nonce, rank, peer)))
            ack = recv_exact(sock, _ACK)
    except TimeoutError:
        raise ReplayError(f"tcp: rank {rank}: rank {peer} did not answer the handshake in time") from None
    except (OSError, ReplayError):  # the peer refused this rank's hello
        raise ReplayError(
            f"tcp: rank {rank}: rank {peer} closed the connection during the handshake (another run's secret?)"
        ) from None
    if magic != _MAGIC:
        raise ReplayError(f"tcp: rank {rank}: rank {peer}'s address answered {magic:#x}, not a rank")
    if not hmac.compare_digest(ack, _mac(secret, b"ack", nonce, rank, peer)):
        raise ReplayError(f"tcp: rank {rank}: rank {peer}'s address answered without the run's secret")


def accept(sock: socket.socket, secret: bytes, rank: int, world: int, timeout_s: float) -> int:
    """Acceptor's side: the rank of a peer that proves it holds the secret within `timeout_s`;
    Refused otherwise (the caller closes the socket and goes on)."""
    nonce = secrets.token_bytes(16)
    sock.settimeout(timeout_s)
    try:
        sock.sendall(_CHALLENGE.pack(_MAGIC, nonce))
        peer, mac = _HELLO.unpack(recv_exact(sock, _HELLO.size))
        if 0 <= peer < world and peer != rank and hmac.compare_digest(mac, _mac(secret, b"hello", nonce, peer, rank)):
            sock.sendall(_mac(secret, b"ack", nonce, peer, rank))
            return peer
    except TimeoutError:
        raise Refused(f"no hello within {timeout_s:g} s") from None
    except (OSError, ReplayError) as exc:
        raise Refused(f"no complete hello ({exc})") from None
    raise Refused("a hello without the run's secret")


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ReplayError("tcp: a peer closed the connection during the handshake")
        data += part
    return data
