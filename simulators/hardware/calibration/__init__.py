"""Measured kernel times that override the analytical compute model where a spec names a table;
the CSV format, the interpolation rule and an example made from Vidur's public A100 profile
(examples/) are in README.md."""

from simulators.hardware.calibration._table import (
    CalibrationPoints,
    CalibrationTable,
    calibration_table,
    load_calibration,
    parse_calibration,
)

__all__ = ["CalibrationPoints", "CalibrationTable", "calibration_table", "load_calibration", "parse_calibration"]
