"""Physical validation: replay collective traffic with real bytes between ranks and measure it.

Transports behind one interface (`Transport`): TCP sockets everywhere, RDMA through pyverbs
where a device exists (`devices()` reports what this machine has). Schedules are data
(`schedule_of`: the algorithm's shared schedule, simulators.network.collective_schedule, as
per-rank steps), run by one transport-agnostic executor on local processes (`replay`,
`replay_many`); dse.physical.replay_ray runs the same executor as Ray actors. pyverbs is imported only
when used.
"""

from simulators.rdma._devices import DeviceReport, devices
from simulators.rdma._errors import MismatchError, ReplayError
from simulators.rdma._executor import CHECKSUMS, Plan, RankResult, Traffic, run_rank
from simulators.rdma._handshake import new_secret
from simulators.rdma._pyverbs import RdmaTransport
from simulators.rdma._replay import Replay, replay, replay_many
from simulators.rdma._schedule import OPS, Schedule, Step, bucket_sizes, replay_algorithm, round_nbytes, schedule_of
from simulators.rdma._transport import Request, TcpTransport, Transport
from simulators.rdma._transports import TRANSPORTS, transport_of

__all__ = [
    "CHECKSUMS",
    "DeviceReport",
    "OPS",
    "TRANSPORTS",
    "MismatchError",
    "Plan",
    "RankResult",
    "RdmaTransport",
    "Replay",
    "ReplayError",
    "Request",
    "Schedule",
    "Step",
    "TcpTransport",
    "Traffic",
    "Transport",
    "bucket_sizes",
    "devices",
    "new_secret",
    "replay",
    "replay_algorithm",
    "replay_many",
    "round_nbytes",
    "run_rank",
    "schedule_of",
    "transport_of",
]
