"""`dse collectives`: every registered collective algorithm's time and nccl-tests bus bandwidth,
per op, message size and scale on one fabric, at a fidelity level, and which one `auto` picks.

What the Python API gave before (simulators.network.collective_time_s per algorithm) as a table
a user can read against nccl-tests: busbw is algbw times 2(n-1)/n for all_reduce and (n-1)/n for
all_gather, reduce_scatter and all_to_all, so a bandwidth-optimal algorithm reads the link rate.
An algorithm that does not implement an op, or cannot run on the placement (NVLS beyond an NVLS
domain), keeps its row and says why in the cell. The packet level is refused beyond
PACKET_MAX_GPUS GPUs or PACKET_MAX_BYTES per collective: a 512-GPU ring all-reduce of 1 GiB is
hundreds of millions of packets, hours on this tool's packet engine.
"""

from __future__ import annotations

import argparse
import json
import math

from rich.console import Console

from dse.cli.listings import new_table
from dse.errors import SpecError

# At these bounds one column (every algorithm of one op, size and scale) takes about 25 s of one
# core (measured: 128 H100s, 64 MiB all-reduce); the packet count grows with GPUs^2 x size.
PACKET_MAX_GPUS = 128
PACKET_MAX_BYTES = 64 * 2**20


def size_text(nbytes: int) -> str:
    """`1 GiB`, `256 MiB`, `3000 B`: the largest binary unit that divides the size, else bytes."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def time_text(seconds: float) -> str:
    """Seconds in the unit that keeps three significant digits readable (us, ms or s)."""
    if seconds < 1e-3:
        return f"{seconds * 1e6:.3g} us"
    if seconds < 1:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds:.3g} s"


def collective_rows(
    ops: list[str], sizes: list[int], scales: list[int], level: str, gpu_name: str, family: str, nic_gbps: float
) -> list[dict]:
    """One row per (op, scale, size, algorithm): time_s and busbw (None with a `reason` where the
    algorithm cannot run), and whether `auto` picks it; every flag checked before any run."""
    from simulators.fidelity import LEVELS
    from simulators.hardware import get_gpu
    from simulators.network import ALGORITHMS, OPS, Fabric, bus_bandwidth_gbytes_per_s, choose_algorithm

    for op in ops:
        if op not in OPS:
            raise SpecError(f"--op: {op!r} is not a collective; allowed: {', '.join(OPS)}")
    if level not in LEVELS:
        raise SpecError(f"--level: {level!r} is not a fidelity level; allowed: {', '.join(LEVELS)}")
    gpu = get_gpu(gpu_name, "--gpu")
    try:
        fabric = Fabric(family, nic_gbps=nic_gbps)
        for n in scales:
            fabric.check(n)
    except SpecError as err:
        raise SpecError(f"--fabric/--num-gpus: {err}") from None
    if level == "packet" and (max(scales) > PACKET_MAX_GPUS or max(sizes) > PACKET_MAX_BYTES):
        raise SpecError(
            f"--level packet: {max(scales)} GPUs, {size_text(max(sizes))} would take too long; allowed: at most "
            f"{PACKET_MAX_GPUS} GPUs and {size_text(PACKET_MAX_BYTES)} per collective (use --level flow beyond)"
        )
    from simulators.fidelity._one_collective import collective_level_time_s

    rows = []
    for op in ops:
        for n in scales:
            network = fabric.network(gpu, n)
            for nbytes in sizes:
                picked = str(choose_algorithm(op, nbytes, n, 1, network).algorithm)
                for algorithm in ALGORITHMS.values():
                    row = {"op": op, "num_gpus": n, "nbytes": nbytes, "algorithm": algorithm.name, "level": level}
                    row.update(time_s=None, busbw_gbytes_per_s=None, reason=None, auto=algorithm.name == picked)
                    if op not in algorithm.costs:
                        row["reason"] = f"no {op}"
                    else:
                        try:
                            time_s = collective_level_time_s(level, op, nbytes, n, algorithm.name, fabric, gpu)
                        except SpecError as err:
                            time_s, row["reason"] = math.inf, str(err)
                        if math.isinf(time_s):
                            row["reason"] = row["reason"] or f"cannot run on {n} GPUs of this fabric"
                        else:
                            row["time_s"] = time_s
                            if time_s > 0:
                                row["busbw_gbytes_per_s"] = float(bus_bandwidth_gbytes_per_s(op, nbytes, n, time_s))
                    rows.append(row)
    return rows


def collectives_command(args: argparse.Namespace, console: Console) -> int:
    from simulators.network import ALGORITHMS

    scales, sizes = sorted(set(args.num_gpus)), sorted(set(args.bytes))
    rows = collective_rows(args.op, sizes, scales, args.level, args.gpu, args.fabric, args.nic_gbps)
    if args.json:
        print(json.dumps(rows))
        return 0
    console.print(
        f"{args.gpu}, {args.fabric} fabric, {args.nic_gbps:g} Gb/s NICs, {args.level} level: time and nccl-tests "
        "bus bandwidth (GB/s) of each registered algorithm; * marks the one auto picks (NCCL's tuner: the "
        "fastest of the algorithms NCCL runs, on the analytical costs)"
    )
    columns = [(n, size) for n in scales for size in sizes]
    for op in args.op:
        table = new_table(op, ["algorithm", *(f"{n} GPUs, {size_text(size)}" for n, size in columns)])
        cells: dict[str, dict] = {}
        for row in rows:
            if row["op"] == op:
                cells.setdefault(row["algorithm"], {})[(row["num_gpus"], row["nbytes"])] = row
        for algorithm, by_column in cells.items():
            name = algorithm if ALGORITHMS[algorithm].in_nccl else f"{algorithm} (not in NCCL)"
            table.add_row(name, *(_cell(by_column[column]) for column in columns))
        console.print(table)
    if args.level != "analytical":
        console.print(
            f"at the {args.level} level each group runs one instance of the algorithm's schedule (one channel): a ring "
            "or tree crossing servers leaves each through one GPU's NIC, where NCCL's channels spread it over the "
            "server's NICs (the analytical level counts them), so cross-server rings and trees of several GPUs per "
            "server come out up to that many times slower here; the fidelity ladder uses this level for ratios "
            "(together against alone), not for these absolute times"
        )
    return 0


def _cell(row: dict) -> str:
    if row["reason"]:
        return row["reason"]
    mark = " *" if row["auto"] else ""
    busbw = "-" if row["busbw_gbytes_per_s"] is None else f"{row['busbw_gbytes_per_s']:.1f} GB/s"
    return f"{time_text(row['time_s'])}, {busbw}{mark}"
