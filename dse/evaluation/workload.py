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


def time_simai_workload(
    path: Path, gpu_name: str, overlap_pp: bool = True, num_gpus: int | None = None
) -> dict[str, float]:
    """Seconds per part of one iteration of the workload in `path` on `gpu_name` GPUs;
    `num_gpus` is the job's size where the file's header does not state it (older AICB files)."""
    workload = parse_simai_workload(read_text(path, "workload import", WORKLOAD_LIMIT), str(path))
    sizes = simai_group_sizes(workload.header, num_gpus)
    network = Network.from_gpu(get_gpu(gpu_name, "--gpu"))
    tp, ep = sizes["tp"], sizes["ep"]
    strides = {"tp": 1, "ep": tp, "dp": tp, "dp_ep": tp * ep, "pp": sizes["dp"] * tp}

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
