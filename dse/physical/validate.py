"""Physical validation: the best candidates' collectives replayed with real bytes, beside what the
model predicts for them (`dse validate`).

For each of the first `top` Pareto candidates of a training study, every collective of its step
that the replay knows (all-reduce, all-gather, reduce-scatter, all-to-all; simulators.rdma) runs
on this machine's ranks (local processes, or Ray actors one per node with `--ray-address`) over
TCP or RDMA. A machine rarely has a job's GPU count or its gigabytes of gradients, so a
collective replays on at most `max_ranks` ranks and `message_cap_bytes` bytes, and the model's
prediction is for that same size and rank count on the candidate's network, by the algorithm the
analytical model chose for the collective where ranks alone can run it (not NVLS, which reduces in
the switch; otherwise ring, pairwise for all-to-all; column `algorithm`): the comparison is of
the network model against the transport it runs on. `validation.csv` holds predicted and
measured times, the error and both bus bandwidths (nccl-tests conventions).

`calibrate` fits the one number the analytical network model takes from such a measurement:
the NIC efficiency (share of the line rate a collective's bus bandwidth reaches), as the
median of measured / predicted bus bandwidth times the efficiency the prediction used, and
writes it (dse.spec.network_calibration) as `network_calibration.yaml`, which a later spec names in
`hardware.network_calibration`.

What a replay can stand for: only RDMA between ranks on different nodes (one rank a node)
exercises NICs the way the modelled scale-out fabric does, and only for a collective the model
runs across servers (column `scale`). Ranks on one machine talk through its loopback or
memory, not NVLink or the NICs; TCP adds the kernel's socket path. Such rows are kept and
shown (column `stands_for_fabric` False, `replay_scope` says why), but the error they show is
the model against this transport, and a calibration refuses them.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pandas as pd

from dse.errors import SpecError
from dse.evaluation.space import SearchSpace
from dse.physical import VALIDATION_FILE
from dse.spec import load_study
from simulators.analytical import plan_collectives
from simulators.network import bus_bandwidth_gbytes_per_s, collective_time_s
from simulators.rdma import OPS, TRANSPORTS, Traffic, replay_algorithm, replay_many, round_nbytes


def validate_study(
    out_dir: Path,
    top: int = 3,
    transport: str = "tcp",
    runner="processes",
    max_ranks: int = 8,
    message_cap_bytes: int = 64 << 20,
    iters: int = 3,
) -> pd.DataFrame:
    """Replay the top candidates' collectives; returns (and writes) the validation table."""
    from dse.spec.kind import STUDY_KINDS
    from dse.study import resolve_study

    _check_args(top, transport, max_ranks, message_cap_bytes, iters)
    spec_path, front_path = out_dir / "spec.yaml", out_dir / "pareto.csv"
    for path in (spec_path, front_path):
        if not path.is_file():
            raise SpecError(f"validate: {out_dir} holds no {path.name}; run dse search first")
    resolved = resolve_study(load_study(spec_path))
    if not resolved.kind.replays_collectives:
        allowed = ", ".join(name for name, kind in STUDY_KINDS.items() if kind.replays_collectives)
        raise SpecError(
            f"validate: replays collectives, which a {resolved.kind.name} study does not time "
            f"(allowed modes: {allowed})"
        )
    front = pd.read_csv(front_path)
    if front.empty:
        raise SpecError(f"validate: {front_path} has no candidate (no feasible trial)")
    space = SearchSpace.from_study(resolved)
    # One replay session per rank count: every collective of that size runs on the same ranks.
    wanted: dict[int, list[tuple[dict, Traffic]]] = defaultdict(list)
    for _, row in front.head(top).iterrows():
        candidate = space.candidate(space.params_of_row(row))
        network = candidate.system.fabric_network
        for use in plan_collectives(candidate):
            if use.op not in OPS or use.ranks < 2:
                continue
            ranks = min(use.ranks, max_ranks)
            algorithm = replay_algorithm(use.op, ranks, use.algorithm)
            nbytes = round_nbytes(use.op, ranks, int(min(use.nbytes, message_cap_bytes)), algorithm)
            predicted_s = float(collective_time_s(use.op, nbytes, ranks, use.stride, network, algorithm))
            record = {
                "trial": int(row["trial"]),
                "collective": use.name,
                "op": use.op,
                "algorithm": algorithm,
                "ranks": ranks,
                "stride": use.stride,
                "scale": "scale-out" if ranks * use.stride > network.domain_gpus else "scale-up",
                "nbytes": nbytes,
                "predicted_s": predicted_s,
                "nic_efficiency": network.nic_efficiency,
                "predicted_busbw_gbytes_per_s": float(bus_bandwidth_gbytes_per_s(use.op, nbytes, ranks, predicted_s)),
            }
            wanted[ranks].append((record, Traffic(use.op, nbytes, algorithm=algorithm)))
    if not wanted:
        raise SpecError(
            f"validate: the first {top} candidates of {front_path} run no collective over 2 or more ranks that "
            f"the replay knows ({', '.join(OPS)}); nothing to replay"
        )
    rows = []
    for ranks, items in wanted.items():
        results = replay_many([traffic for _, traffic in items], transport, ranks, iters=iters, runner=runner)
        for (record, _), result in zip(items, results):
            rows.append(
                {
                    **record,
                    "measured_s": result.time_s,
                    "error_pct": (record["predicted_s"] / result.time_s - 1) * 100,
                    "measured_busbw_gbytes_per_s": result.busbw_gbytes_per_s,
                    "verified": result.verified,
                    "transport": transport,
                    "placement": result.placement,
                    "stands_for_fabric": stands_for_fabric(transport, result.placement, record["scale"]),
                }
            )
    table = pd.DataFrame(rows)
    table.to_csv(out_dir / VALIDATION_FILE, index=False)
    return table


def stands_for_fabric(transport: str, placement: str, scale: str) -> bool:
    """Whether a replayed collective exercises what the model prices: RDMA between ranks one
    per node (Ray's STRICT_SPREAD placement), for a collective the model runs across servers."""
    return transport == "rdma" and placement.startswith("ray STRICT_SPREAD") and scale == "scale-out"


def replay_scope(table: pd.DataFrame) -> str:
    """One line saying what the replay measured and what its error column compares."""
    if table["stands_for_fabric"].all():
        return "RDMA between nodes, one rank a node: the error is the network model's against these NICs"
    transport, placement = table["transport"].iloc[0], table["placement"].iloc[0]
    where = "processes on this machine" if placement == "processes" else placement.removeprefix("ray ")
    what = "kernel TCP sockets" if transport == "tcp" else "RDMA"
    cannot = []
    if not placement.startswith("ray STRICT_SPREAD"):  # processes, or Ray ranks packed or spread unevenly
        cannot.append("ranks share a machine, so bytes never cross NVLink or the NICs the model prices")
    if transport == "tcp":
        cannot.append("TCP's socket path is not the RDMA the model prices")
    if (table["scale"] == "scale-up").any():
        cannot.append("collectives the model keeps inside the NVLink domain cannot be replayed over NICs")
    return (
        f"replayed over {what} between {where}: {'; '.join(cannot) or 'some rows are not comparable'}; "
        f"{int(table['stands_for_fabric'].sum())} of {len(table)} rows stand for the modelled fabric, the error of "
        "the others is the model against this transport, not the model's error"
    )


def _check_args(top, transport: str, max_ranks, message_cap_bytes, iters) -> None:
    """One-line errors for bad arguments, before any study is loaded (the CLI flag in brackets)."""
    for name, flag, value, low in (
        ("top", "--top", top, 1),
        ("max_ranks", "--max-ranks", max_ranks, 2),
        ("message_cap_bytes", "--max-mb", message_cap_bytes, 1),
        ("iters", None, iters, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            where = f"validate.{name}" + (f" ({flag})" if flag else "")
            raise SpecError(f"{where}: {value!r} is not allowed; allowed: integers >= {low}")
    if transport not in TRANSPORTS:
        raise SpecError(f"validate.transport: {transport!r} is unknown; allowed: {', '.join(TRANSPORTS)}")
