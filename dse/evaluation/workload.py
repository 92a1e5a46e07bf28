"""`dse workload import FILE --gpu NAME`: time a SimAI/AICB workload file with our network model.

SimAI-Analytical prices collectives with fixed bus bandwidths and a latency table; here the
same rows are priced by simulators.network on the GPU's reference system (NVLink domain, one
NIC per GPU), with ranks placed as Megatron does: tp innermost, then ep, then dp.
"""

from __future__ import annotations

from pathlib import Path

from dse.spec.inputs import WORKLOAD_LIMIT, read_text
from simulators.hardware import get_gpu
from simulators.network import Network, collective_time_s
from simulators.workload import parse_simai_workload, simai_group_sizes, simai_time_breakdown


def time_simai_workload(path: Path, gpu_name: str, overlap_pp: bool = True) -> dict[str, float]:
    """Seconds per part of one iteration of the workload in `path` on `gpu_name` GPUs."""
    workload = parse_simai_workload(read_text(path, "workload import", WORKLOAD_LIMIT), str(path))
    header = workload.header
    sizes = simai_group_sizes(header)
    network = Network.from_gpu(get_gpu(gpu_name, "--gpu"))
    strides = {"tp": 1, "ep": header.tp, "dp": header.tp, "dp_ep": header.tp * header.ep, "pp": sizes["dp"] * header.tp}

    def collective_s(op: str, group: str, nbytes: float) -> float:
        ranks = 2 if op == "send_recv" else sizes[group]
        if ranks == 1 or nbytes == 0:
            return 0.0
        return float(collective_time_s(op, nbytes, ranks, strides[group], network))

    parts = simai_time_breakdown(workload, collective_s, overlap={"pp": 1.0} if overlap_pp else None)
    out = {
        "compute_s": parts.compute_s,
        "exposed_tp_s": parts.exposed_tp_s,
        "exposed_ep_s": parts.exposed_ep_s,
        "exposed_dp_s": parts.exposed_dp_s,
        "exposed_dp_ep_s": parts.exposed_dp_ep_s,
        "exposed_pp_s": parts.exposed_pp_s,
        "bubble_s": parts.bubble_s,
    }
    out["iteration_time_s"] = sum(out.values())
    return out
