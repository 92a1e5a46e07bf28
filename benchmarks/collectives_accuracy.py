"""Accuracy of the collective cost model against published NCCL bus bandwidths.

Why: every training candidate's communication time comes from `simulators.network`; before the
search trusts it we need to know how far its bus bandwidths are from measured ones. This replays
every row of ../shared/validation/collectives.csv (see its README) through the model with the
cited constants and nothing fitted: the catalogue network of the row's GPU, with the row's
gpus_per_node and nic_gbps_per_gpu where given, the row's algorithm where stated (else `auto`,
NCCL's choice), and prints predicted vs measured busbw (nccl-tests convention) per row, the
signed error (predicted / measured - 1), summaries, and the rows it could not evaluate and why.

Stated choices for what the rows leave blank:
  message_bytes blank  -> evaluated at 8 GiB, the top of the nccl-tests sweeps in this file
                          (the rows quote plateau values "at large sizes");
  num_gpus blank       -> two scale-up domains of gpus_per_node (the smallest multi-node job;
                          the rows with it blank describe inter-node runs);
  gpu blank            -> the catalogue GPU whose name or alias the row id contains, if any.

With --calibrated, the size-dependent correction `dse calibrate nccl-tests` fits is tried out
of sample: each sweep of one source (one GPU type, one node, several sizes) is fitted as a
user's nccl-tests logs would be, and the rows of other sources on that node (and, for the
Hopper sweep, on H100 nodes, stated as a transfer) are predicted with it; within each sweep
every size is also predicted from the other sizes (leave one size out).

    python benchmarks/collectives_accuracy.py [--csv PATH] [--calibrated]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from dse.calibrate.nccl_tests import Measurement, fit_curves
from simulators import DseError
from simulators.hardware import GpuSpec, get_gpu, gpu_catalog
from simulators.network import Network, bus_bandwidth_gbytes_per_s, choose_algorithm, collective_time_s

DEFAULT_CSV = (Path(__file__).resolve().parents[1] / "../shared/validation/collectives.csv").resolve()
LARGE_BYTES = 2**33


class Skip(Exception):
    """The row cannot be compared with the model; the message says why."""


@dataclass(frozen=True)
class Outcome:
    row: dict[str, str]
    gpu: str
    ranks: int
    nbytes: int
    algorithm: str
    predicted: float
    assumptions: tuple[str, ...]

    @property
    def measured(self) -> float:
        return float(self.row["busbw_gbps"])

    @property
    def error(self) -> float:
        return self.predicted / self.measured - 1


def _gpu(row: dict[str, str]) -> tuple[GpuSpec, tuple[str, ...]]:
    if row["gpu"]:
        try:
            return get_gpu(row["gpu"]), ()
        except DseError:
            raise Skip(f"gpu {row['gpu']} is not in the catalogue") from None
    ident = row["id"].lower()
    names = {key.lower(): spec.name for spec in gpu_catalog().values() for key in (spec.name, *spec.aliases)}
    found = sorted((k for k in names if k in ident), key=len, reverse=True)
    if not found:
        raise Skip("gpu blank and the id names no catalogue GPU")
    gpu = get_gpu(names[found[0]])
    return gpu, (f"gpu blank: {gpu.name} from the id",)


def _network(row: dict[str, str], gpu: GpuSpec) -> Network:
    net = Network.from_gpu(gpu)
    if row["gpus_per_node"]:
        net = dataclasses.replace(net, domain_gpus=int(row["gpus_per_node"]))
    if row["nic_gbps_per_gpu"]:
        net = dataclasses.replace(net, nic_gbytes_per_s=float(row["nic_gbps_per_gpu"]) / 8)
    return net


def evaluate(row: dict[str, str]) -> Outcome:
    """The model's busbw for one row; Skip where it cannot be compared."""
    op = row["collective"]
    if op.endswith("_aggregate"):
        raise Skip("job-level aggregate (effective bisection bandwidth), not per-GPU nccl-tests busbw")
    gpu, assumptions = _gpu(row)
    net = _network(row, gpu)
    if row["num_gpus"]:
        ranks = int(row["num_gpus"])
    elif row["gpus_per_node"]:
        ranks = 2 * int(row["gpus_per_node"])
        assumptions += (f"num_gpus blank: {ranks} (two domains)",)
    else:
        raise Skip("num_gpus and gpus_per_node blank")
    nbytes = int(row["message_bytes"]) if row["message_bytes"] else LARGE_BYTES
    if not row["message_bytes"]:
        assumptions += ("message_bytes blank: 8 GiB",)
    if row["algorithm"]:
        algorithm = row["algorithm"]
        time_s = collective_time_s(op, nbytes, ranks, 1, net, algorithm)
    else:
        choice = choose_algorithm(op, nbytes, ranks, 1, net)
        algorithm, time_s = f"auto:{choice.algorithm}", choice.time_s
    predicted = float(bus_bandwidth_gbytes_per_s(op, nbytes, ranks, time_s))
    return Outcome(row, gpu.name, ranks, nbytes, algorithm, predicted, assumptions)


def _size(nbytes: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def summary_line(label: str, outcomes: list[Outcome]) -> str:
    errors = [o.error for o in outcomes]
    worst = max(outcomes, key=lambda o: abs(o.error))
    return (
        f"  {label:<40} n={len(outcomes):3d}  MAPE={100 * statistics.fmean(abs(e) for e in errors):5.1f}%  "
        f"median|e|={100 * statistics.median(abs(e) for e in errors):5.1f}%  "
        f"max|e|={100 * abs(worst.error):6.1f}% ({worst.row['id']})  bias={100 * statistics.fmean(errors):+6.1f}%"
    )


def _measurement(o: Outcome) -> Measurement:
    """A row as one line of an nccl-tests log (time from the bus bandwidth, nccl-tests' size)."""
    time_s = o.nbytes / (o.measured * 1e9) * float(_bus_factor(o.row["collective"], o.ranks))
    return Measurement(o.row["collective"], o.ranks, 1, o.nbytes, time_s, o.measured)


def _bus_factor(op: str, ranks: int) -> float:
    return {"all_reduce": 2 * (ranks - 1) / ranks}.get(op, (ranks - 1) / ranks)


def calibrated(outcomes: list[Outcome]) -> None:
    """Out-of-sample errors with the fitted correction (see the module docstring)."""
    single = [o for o in outcomes if o.row["message_bytes"] and o.ranks <= get_gpu(o.gpu).scaleup_domain_gpus]
    sweeps: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in single:
        sweeps[(o.row["source"], o.gpu)].append(o)
    sweeps = {key: rows for key, rows in sweeps.items() if len(rows) >= 3}
    print("\nCALIBRATED (the fitted curve of one sweep applied to rows it was not fitted on)")
    before, after = [], []
    for (source, gpu_name), sweep in sweeps.items():
        gpu = get_gpu(gpu_name)
        fitted = fit_curves([_measurement(o) for o in sweep], gpu, source)
        targets = [o for o in single if o.row["source"] != source and _same_node(o.gpu, gpu_name)]
        for o in targets:
            after.append(_recalibrated(o, fitted))
            before.append(o)
        for held in sweep:  # leave one size out
            rest = [_measurement(o) for o in sweep if o is not held]
            after.append(_recalibrated(held, fit_curves(rest, gpu, source)))
            before.append(held)
        print(f"  fitted on {source} ({gpu_name}, {len(sweep)} sizes); predicts {len(targets)} rows of other sources")
    for label, group in (("before (model alone)", before), ("after (fitted curve)", after)):
        print(summary_line(label, group))
    print(
        f"collectives calibrated: MAPE {100 * statistics.fmean(abs(o.error) for o in after):.1f}% over {len(after)} "
        f"rows out of sample (model alone {100 * statistics.fmean(abs(o.error) for o in before):.1f}%)"
    )


def _same_node(gpu: str, fitted: str) -> bool:
    """Rows a sweep's curve may stand for: the same GPU type, or H100 from an H200 sweep (the same
    NVSwitch generation and NCCL algorithms; a transfer, said so in RESULTS)."""
    return gpu == fitted or {gpu, fitted} == {"H100-SXM", "H200"}


def _recalibrated(o: Outcome, calibration) -> Outcome:
    net = dataclasses.replace(_network(o.row, get_gpu(o.gpu)), calibration=calibration)
    algorithm = o.algorithm.removeprefix("auto:")
    time_s = collective_time_s(o.row["collective"], o.nbytes, o.ranks, 1, net, algorithm)
    predicted = float(bus_bandwidth_gbytes_per_s(o.row["collective"], o.nbytes, o.ranks, time_s))
    return dataclasses.replace(o, predicted=predicted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument("--calibrated", action="store_true", help="also the fitted size correction, out of sample")
    args = parser.parse_args()
    with args.csv.open(newline="") as f:
        rows = list(csv.DictReader(f))

    outcomes: list[Outcome] = []
    skipped: list[tuple[str, str]] = []
    for row in rows:
        try:
            outcomes.append(evaluate(row))
        except Skip as why:
            skipped.append((row["id"], str(why)))

    header = ("id", "gpu", "n", "size", "algorithm", "measured", "predicted", "error")
    print("{:<34} {:<10} {:>4} {:>9} {:<24} {:>9} {:>9} {:>7}".format(*header))
    for o in outcomes:
        print(
            f"{o.row['id']:<34} {o.gpu:<10} {o.ranks:>4} {_size(o.nbytes):>9} {o.algorithm:<24} "
            f"{o.measured:>9.1f} {o.predicted:>9.1f} {100 * o.error:>+6.1f}%"
            + (f"   [{'; '.join(o.assumptions)}]" if o.assumptions else "")
        )

    print("\nSUMMARY (busbw GB/s; error = predicted / measured - 1, + = model optimistic)")
    if outcomes:
        print(summary_line("all rows", outcomes))
        by_source: dict[str, list[Outcome]] = defaultdict(list)
        for o in outcomes:
            by_source[o.row["source"]].append(o)
        for source, group in by_source.items():
            print(summary_line(source, group))
        sized = [o for o in outcomes if o.row["message_bytes"]]
        if sized:
            print(summary_line("rows with a stated message size", sized))
    print(f"\nSkipped rows: {len(skipped)}")
    for ident, why in skipped:
        print(f"  {ident}: {why}")
    if args.calibrated:
        calibrated(outcomes)


if __name__ == "__main__":
    main()
