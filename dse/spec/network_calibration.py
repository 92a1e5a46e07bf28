"""The network calibration file: what `dse validate --calibrate` fits and a later spec names.

Why its own module: the spec's checks read the file (`hardware.network_calibration`) and the
physical validation writes it; keeping the format here lets both use it without the checks
importing the replay machinery (which imports the checks: a circle).
"""

from __future__ import annotations

import datetime
import platform
import statistics
from pathlib import Path

import pandas as pd
import yaml

from dse.errors import SpecError
from dse.spec.inputs import NETWORK_CALIBRATION_LIMIT, load_yaml, read_text

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
            f"validate --calibrate: none of the {len(table)} collectives replayed over {transport} ({placement}) stands "
            "for the modelled NIC fabric; allowed: --transport rdma with one rank a node (--ray-address of a cluster "
            "with at least --max-ranks nodes), for collectives the model runs across servers"
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


def load_calibration(path: str | Path) -> float:
    """The NIC efficiency a `network_calibration.yaml` holds, read through the front door
    (dse.spec.inputs: a bounded regular file, YAML with limits); SpecError naming the file if bad."""
    field = "hardware.network_calibration"
    record = load_yaml(read_text(path, field, NETWORK_CALIBRATION_LIMIT), f"{field}: {path}")
    try:
        efficiency = float(record["nic_efficiency"])
    except (KeyError, TypeError, ValueError) as exc:
        raise SpecError(f"hardware.network_calibration: {path} is not a calibration file ({exc})") from None
    if not 0 < efficiency <= 1:
        raise SpecError(f"hardware.network_calibration: nic_efficiency {efficiency} in {path}; allowed: (0, 1]")
    return efficiency
