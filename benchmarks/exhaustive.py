"""The exact mode on a space of a million plans (or ten million): every distinct plan recorded, the front kept.

Why: issue 20 asks for the exact Pareto front of a 10^6-plan space in at most 60 s on 2 cores,
with every plan recorded (Parquet) and only the front in the study database. The space is
search_spaces/llama70b.yaml widened to three GPU types, seven cluster sizes, three NIC speeds,
four vpp values, four micro-batches, three ZeRO stages and two offload choices (1.45 million
combinations); the run is
`dse search --sampler exhaustive --fidelity analytical` as a user would start it (a private
local Ray on every core, or `--ray-address off`), timed from start to the front stored. A plan
is simulated unless it cannot be built, does not fit in memory, or its step floor is dominated
by the plans found before it (dse/search/exhaustive.py: pruned, the front unchanged).

`--scale 10m`: the issue's second target, 10^7 plans in at most 10 minutes on a Ray cluster of a
few nodes. Its example is GPT-3 175B with Calculon's knobs (Isaev et al. 2023: parallel degrees,
micro-batch, recompute, sequence parallelism, TP overlap, optimizer sharding and offload) grown
by GPU type, GPU count, fabric and NIC speed: 13.9 million combinations, 10.2 million distinct
plans. `--nodes N` runs it on a multi-node cluster simulated on this machine (ray.cluster_utils:
a head with no CPUs and N worker nodes sharing this machine's CPUs), joined by its address as
`dse search --ray-address ADDR` joins a real one.

`--timeout-s T` stops it after T seconds (the spec's budget.timeout_s): the ranges go out spread
over the space, so the plans done by then are a sample of all of it, for a projection.

    python benchmarks/exhaustive.py [--scale 1m|10m] [--ray-address local|off | --nodes N] [--timeout-s T]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from dse.evaluation.space import SearchSpace
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study

SPEC = Path(__file__).resolve().parents[1] / "search_spaces" / "llama70b.yaml"
MILLION = {
    "hardware.gpu": ["H100-SXM", "H200", "B200"],
    "hardware.num_gpus": [64, 128, 256, 512, 1024, 2048, 4096],
    "hardware.fabric.nic_gbps": [200, 400, 800],
    "search.vpp": [1, 2, 4, 5],
    "search.micro_batch": [1, 2, 4, 8],
    "search.zero_stage": [0, 1, 3],
    "search.offload": ["none", "optimizer"],
    "sampler": "exhaustive",
}
# GPT-3's recipe: 2,048-token sequences, 3.2M-token batches (1,536 sequences; Brown et al. 2020, Table 2.1)
TEN_MILLION = {
    "name": "gpt3-175b-exact",
    "model": "gpt3-175b",
    "training.seq_len": 2048,
    "training.global_batch_tokens": {"min": 3145728, "max": 3145728},
    "hardware.gpu": ["A100-80GB", "H100-SXM", "H200", "B200"],
    "hardware.num_gpus": [128, 256, 512, 1024, 2048, 4096, 8192],
    "hardware.fabric.family": ["rail-optimized", "fat-tree", "leaf-spine"],
    "hardware.fabric.nic_gbps": [200, 400, 800],
    "search.tp": [1, 2, 4, 8],
    "search.pp": [1, 2, 4, 8, 16, 32],
    "search.vpp": [1, 2, 3, 4],
    "search.micro_batch": [1, 2, 4, 8],
    "search.global_batch": [1536],
    "search.recompute": ["none", "selective", "full"],
    "search.schedule": ["1f1b", "zb-h1"],
    "search.zero_stage": [0, 1, 3],
    "search.offload": ["none", "optimizer"],
    "search.sequence_parallel": [True, False],
    "search.tp_comm_overlap": [True, False],
    "sampler": "exhaustive",
}
SCALES = {"1m": MILLION, "10m": TEN_MILLION}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=sorted(SCALES), default="1m", help="the space: 1m (default) or 10m plans")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--ray-address", default="local", help="local (default), off, or a cluster's address")
    where.add_argument("--nodes", type=int, help="run on a local cluster of this many worker nodes")
    parser.add_argument("--timeout-s", type=float, help="stop after this many seconds (budget.timeout_s)")
    args = parser.parse_args()
    study = load_study(SPEC, **SCALES[args.scale], **{"budget.timeout_s": args.timeout_s})
    study = study.model_copy(update={"fidelity": study.fidelity.up_to("analytical")})
    resolved = resolve_study(study)
    print(f"space: {SearchSpace.from_study(resolved).size:,} knob combinations")
    with tempfile.TemporaryDirectory() as tmp, _cluster(args.nodes) as address:
        start = time.perf_counter()
        summary = run_search(resolved, RunSettings(Path(tmp), None, address or args.ray_address))
        wall_s = time.perf_counter() - start
        parts = sum(1 for _ in (Path(tmp) / "plans").glob("part-*.parquet"))
        size_mb = sum(p.stat().st_size for p in (Path(tmp) / "plans").glob("part-*.parquet")) / 1e6
    record = summary.exhaustive
    print(f"{summary.usage.describe(wall_s)}")
    print(
        f"record: {record.plans:,} plans ({record.pruned:,} pruned at their step floor, {record.feasible:,} "
        f"simulated and feasible) in {parts} Parquet parts, {size_mb:.1f} MB"
    )
    print(f"whole run (Ray start, enumeration, evaluation, records, front stored): {wall_s:.1f} s")
    rate = record.evaluated / wall_s
    print(
        f"exhaustive: {record.evaluated} plans in {wall_s:.1f} s = {rate:,.0f} plans/s on {summary.usage.cpus} CPUs; "
        f"front {record.front}"
    )


@contextlib.contextmanager
def _cluster(nodes: int | None) -> Iterator[str | None]:
    """A multi-node Ray cluster on this machine (a head with no CPUs and `nodes` worker nodes
    splitting its CPUs, on loopback with dse's token authentication); yields its address, or
    None without `nodes`."""
    if not nodes:
        yield None
        return
    from ray.cluster_utils import Cluster

    from dse.search.ray_cluster import LOOPBACK, restore_settings, use_loopback, use_token_auth

    use_token_auth()
    use_loopback()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": LOOPBACK})
    cpus = max(1, (os.cpu_count() or 1) // nodes)
    try:
        for _ in range(nodes):
            cluster.add_node(num_cpus=cpus, node_ip_address=LOOPBACK)
        cluster.wait_for_nodes()
        print(f"cluster: {nodes} worker nodes of {cpus} CPUs at {cluster.address}")
        yield cluster.address
    finally:
        cluster.shutdown()
        restore_settings()


if __name__ == "__main__":
    main()
