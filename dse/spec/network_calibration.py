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


def fit_nic_efficiency(table: pd.DataFrame) -> float:
    """The NIC efficiency that makes the model's bus bandwidth the measured one (median over the
    replayed collectives), clipped to (0, 1]."""
    if table.empty:
        raise SpecError("validate --calibrate: no collective was replayed, nothing to fit")
    ratios = table["measured_busbw_gbytes_per_s"] / table["predicted_busbw_gbytes_per_s"] * table["nic_efficiency"]
    return float(min(1.0, max(1e-6, statistics.median(ratios))))


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
