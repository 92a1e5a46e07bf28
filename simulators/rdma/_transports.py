"""The transports a replay can run on, by name: TCP everywhere, RDMA where pyverbs and a device are.

Why its own module: choosing a transport needs both implementations, and the RDMA one builds on
the transport base (simulators/rdma/_transport.py); kept apart, neither imports the other.
"""

from __future__ import annotations

from simulators._errors import SpecError
from simulators.rdma._transport import TcpTransport, Transport

TRANSPORTS = ("tcp", "rdma")


def transport_of(kind: str) -> type[Transport]:
    """The transport class for `kind`; "rdma" only where pyverbs imports and a device exists."""
    if kind == "tcp":
        return TcpTransport
    if kind == "rdma":
        from simulators.rdma._devices import require_rdma
        from simulators.rdma._pyverbs import RdmaTransport

        require_rdma()
        return RdmaTransport
    raise SpecError(f"transport: {kind!r} is unknown; allowed: {', '.join(TRANSPORTS)}")
