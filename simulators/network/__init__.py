"""Networks: collective algorithms and the links they use."""

from simulators.network._collectives import (
    Link,
    group_link,
    ring_all_gather_s,
    ring_all_reduce_s,
    ring_reduce_scatter_s,
    send_recv_s,
)

__all__ = [
    "Link",
    "group_link",
    "ring_all_gather_s",
    "ring_all_reduce_s",
    "ring_reduce_scatter_s",
    "send_recv_s",
]
