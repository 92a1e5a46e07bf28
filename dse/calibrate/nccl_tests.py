"""nccl-tests logs (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf) read,
and the network model's size-dependent correction fitted to them.

A log is what an nccl-tests binary prints (github.com/NVIDIA/nccl-tests, README "Performance"
and its `src/common.cu` table header): `#  Rank  r Group g Pid p on HOST device d [...] NAME`
lines, one per rank, then a table whose rows are `size count type redop root time algbw busbw
#wrong` out of place and again in place (time in us, bandwidths in GB/s; `#wrong` is N/A
without validation). The operation is named by a `# Collective test starting: NAME_perf` line
(nccl-tests 2.13 and later) or by the file name (`all_reduce_perf.log`, ...). Ranks on one host
are one scale-up domain; ranks on several hosts make a scale-out measurement.

The fit: for each measured row the model prices the same operation, size and ranks on the
GPU's catalogue network (the hosts' GPUs in one NVLink domain, one NIC per GPU; `auto` picks
the algorithm as NCCL does), and the factor is the out-of-place time measured over the time
modelled; a size measured in several logs takes the median. The curves go into the network
calibration file a spec names (`hardware.network_calibration`).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from dse.errors import SpecError
from simulators.hardware import GpuSpec
from simulators.network import CollectiveCalibration, CollectiveCurve, Network, collective_time_s

# nccl-tests' binary names (without _perf) -> dse's operation names
OPS = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "reduce_scatter"}
OPS["alltoall"] = "all_to_all"
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)", re.M)  # the binary as run: ./build/all_reduce_perf
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device", re.M)
_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_ROW = re.compile(rf"^\s*(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+(\S+)\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s", re.M)


@dataclass(frozen=True)
class Measurement:
    """One row of a log: `op` on `ranks` ranks over `hosts` hosts, `nbytes` (nccl-tests' size
    column), the out-of-place time and bus bandwidth."""

    op: str
    ranks: int
    hosts: int
    nbytes: int
    time_s: float
    busbw_gbytes_per_s: float


def read_log(path: Path, text: str) -> list[Measurement]:
    """The rows of one nccl-tests log; SpecError naming the file if it is not one."""
    op = _op_of(path, text)
    ranks = {int(r): host for r, host in _RANK.findall(text)}
    if not ranks:
        raise SpecError(f"{path}: no '#  Rank  N Group ... on HOST device' lines; is this an nccl-tests log?")
    rows = [
        Measurement(op, len(ranks), len(set(ranks.values())), int(size), float(time_us) * 1e-6, float(busbw))
        for size, _count, _type, _redop, _root, time_us, _algbw, busbw in _ROW.findall(text)
        if int(size) > 0 and float(time_us) > 0
    ]
    if not rows:
        raise SpecError(f"{path}: no result rows (size count type redop root time algbw busbw ...)")
    return rows


def _op_of(path: Path, text: str) -> str:
    named = _STARTING.search(text)
    name = Path(named.group(1)).name.removesuffix("_perf") if named else path.name.lower().replace("-", "_")
    candidates = [name] if named else [key for key in OPS if key in name]
    if len(candidates) != 1 or candidates[0] not in OPS:
        allowed = ", ".join(f"{key}_perf" for key in OPS)
        raise SpecError(
            f"{path}: cannot tell the operation (no 'Collective test starting' line, and the file name names none "
            f"or several); allowed: {allowed}, named in the file name"
        )
    return OPS[candidates[0]]


def fit_curves(measurements: list[Measurement], gpu: GpuSpec, source: str) -> CollectiveCalibration:
    """Measured over modelled time per operation and scale, at each measured size."""
    factors: dict[tuple[str, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for m in measurements:
        per_host = m.ranks // m.hosts
        if m.ranks % m.hosts or per_host > gpu.scaleup_domain_gpus:
            raise SpecError(
                f"{m.op}: {m.ranks} ranks on {m.hosts} hosts do not make equal NVLink domains of at most "
                f"{gpu.scaleup_domain_gpus} {gpu.name} GPUs; allowed: logs of whole {gpu.name} nodes"
            )
        network = Network.from_gpu(gpu)
        if per_host < gpu.scaleup_domain_gpus and m.hosts > 1:  # fewer GPUs a host than its domain holds
            network = dataclasses.replace(network, domain_gpus=per_host)
        modelled = float(collective_time_s(m.op, m.nbytes, m.ranks, 1, network))
        scale = "scale-out" if m.hosts > 1 else "scale-up"
        factors[(m.op, scale)][m.nbytes].append(m.time_s / modelled)
    curves = tuple(
        CollectiveCurve(op, scale, tuple(sorted(sizes)), tuple(statistics.median(sizes[s]) for s in sorted(sizes)))
        for (op, scale), sizes in sorted(factors.items())
    )
    return CollectiveCalibration(curves, source)
