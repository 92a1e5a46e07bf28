"""The network calibration file: what `dse validate --calibrate` fits and a later spec names.

Why its own module: the spec's checks read the file (`hardware.network_calibration`) and the
physical validation writes it; keeping the format here lets both use it without the checks
importing the replay machinery (which imports the checks: a circle).
"""

from __future__ import annotations

import datetime
import platform
import statistics
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from dse.errors import SpecError
from dse.spec.inputs import NETWORK_CALIBRATION_LIMIT, load_yaml, read_text
from simulators.network import OPS, CollectiveCalibration, CollectiveCurve

CALIBRATION_FILE = "network_calibration.yaml"


# Bounds on a fitted NIC efficiency. NCCL's all-reduce bus bandwidth between nodes reaches most of
# the line rate (../shared/validation/collectives.csv: 370 GB/s on 8x 400 Gb/s NDR per H100 node,
# 0.93 of it, nccl-h100-ndr-internode-ar; 192 GB/s on 8x 200 Gb/s HDR per DGX-A100, 0.96,
# nccl-dgxa100-hdr-internode-ar). A fit below FLOOR (an assumption: a third of line rate, far
# under any tuned fabric) says the replay did not exercise the NICs as a job does, and one above
# CEILING, faster than the line rate allows, that the bytes never crossed them.
NIC_EFFICIENCY_FLOOR = 0.3
NIC_EFFICIENCY_CEILING = 1.05  # measurement noise above 1 is clipped to 1


def fit_nic_efficiency(table: pd.DataFrame) -> float:
    """The NIC efficiency that makes the model's bus bandwidth the measured one: the median over
    the replayed collectives that stand for the modelled fabric (RDMA between nodes, collectives
    the model runs across servers: column `stands_for_fabric`). SpecError, naming why, where no
    row does or where the fit is outside [NIC_EFFICIENCY_FLOOR, NIC_EFFICIENCY_CEILING]."""
    if table.empty:
        raise SpecError("validate --calibrate: no collective was replayed, nothing to fit")
    usable = table[table["stands_for_fabric"].astype(bool)]
    if usable.empty:
        transport, placement = table["transport"].iloc[0], table["placement"].iloc[0]
        raise SpecError(
            f"validate --calibrate: none of the {len(table)} collectives replayed over {transport} ({placement}) "
            "stands for the modelled NIC fabric; allowed: --transport rdma with one rank a node (--ray-address of a "
            "cluster with at least --max-ranks nodes), for collectives the model runs across servers"
        )
    ratios = usable["measured_busbw_gbytes_per_s"] / usable["predicted_busbw_gbytes_per_s"] * usable["nic_efficiency"]
    fitted = float(statistics.median(ratios))
    if not NIC_EFFICIENCY_FLOOR <= fitted <= NIC_EFFICIENCY_CEILING:
        raise SpecError(
            f"validate --calibrate: the fitted nic_efficiency {fitted:.4g} is outside what a NIC fabric reaches; "
            f"allowed: {NIC_EFFICIENCY_FLOOR} to 1 (the replay did not exercise the NICs as a job does)"
        )
    return min(1.0, fitted)


def write_calibration(table: pd.DataFrame, out_dir: Path) -> Path:
    """`network_calibration.yaml` for `hardware.network_calibration` in later specs."""
    path = out_dir / CALIBRATION_FILE
    efficiency = fit_nic_efficiency(table)
    record = {
        "nic_efficiency": round(efficiency, 4),
        "fitted_on": f"{len(table)} collectives replayed over {table['transport'].iloc[0]} "
        f"({table['placement'].iloc[0]}) on {platform.node()}",
        "command": f"dse validate {out_dir} --calibrate",
        "date": datetime.date.today().isoformat(),
    }
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    return path


def write_collective_calibration(calibration: CollectiveCalibration, path: Path, command: str) -> Path:
    """A network calibration file holding measured collective curves (`dse calibrate nccl-tests`)."""
    record = {
        "collectives": [
            {"op": c.op, "scale": c.scale, "sizes_bytes": [int(s) for s in c.sizes_bytes], "factors": list(c.factors)}
            for c in calibration.curves
        ],
        "fitted_on": calibration.source,
        "command": command,
        "date": datetime.date.today().isoformat(),
    }
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    return path


@dataclass(frozen=True)
class NetworkCalibration:
    """What a network calibration file holds: the NIC efficiency `dse validate --calibrate`
    fits, and/or the collective curves `dse calibrate nccl-tests` fits."""

    nic_efficiency: float | None = None
    collectives: CollectiveCalibration | None = None


def load_calibration(path: str | Path) -> NetworkCalibration:
    """The network calibration file, read through the front door (dse.spec.inputs: a bounded
    regular file, YAML with limits); SpecError naming the file if bad."""
    field = "hardware.network_calibration"
    record = load_yaml(read_text(path, field, NETWORK_CALIBRATION_LIMIT), f"{field}: {path}")
    if not isinstance(record, dict) or not ({"nic_efficiency", "collectives"} & set(record)):
        raise SpecError(f"{field}: {path} is not a calibration file (it holds neither nic_efficiency nor collectives)")
    efficiency = None
    if "nic_efficiency" in record:
        try:
            efficiency = float(record["nic_efficiency"])
        except (TypeError, ValueError) as exc:
            raise SpecError(f"{field}: {path} is not a calibration file ({exc})") from None
        if not 0 < efficiency <= 1:
            raise SpecError(f"{field}: nic_efficiency {efficiency} in {path}; allowed: (0, 1]")
    collectives = None
    if "collectives" in record:
        collectives = _curves(record["collectives"], f"{field}: {path}: collectives", str(record.get("fitted_on", "")))
    return NetworkCalibration(efficiency, collectives)


def _curves(entries: object, where: str, source: str) -> CollectiveCalibration:
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{where}: a list of curves (op, scale, sizes_bytes, factors) is needed")
    curves = []
    for i, entry in enumerate(entries):
        keys = ("op", "scale", "sizes_bytes", "factors")
        if not isinstance(entry, dict) or set(entry) != set(keys):
            raise SpecError(f"{where}[{i}]: allowed keys: {', '.join(keys)}")
        sizes, factors = entry["sizes_bytes"], entry["factors"]
        numbers = isinstance(sizes, list) and isinstance(factors, list)
        numbers = numbers and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in sizes + factors)
        if entry["op"] not in OPS or not numbers:
            raise SpecError(f"{where}[{i}]: op one of {', '.join(OPS)}; sizes_bytes and factors lists of numbers")
        try:
            curves.append(CollectiveCurve(entry["op"], entry["scale"], tuple(sizes), tuple(factors)))
        except SpecError as exc:
            raise SpecError(f"{where}[{i}]: {exc}") from None
    try:
        return CollectiveCalibration(tuple(curves), source)
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
