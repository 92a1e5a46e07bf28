"""Measured kernel times that override the analytical compute model; the CSV format and the
interpolation rule are in README.md. No measurements ship with dse: every table is the user's."""

from simulators.hardware.calibration._table import (
    CalibrationPoints,
    CalibrationTable,
    calibration_table,
    load_calibration,
    parse_calibration,
)

__all__ = ["CalibrationPoints", "CalibrationTable", "calibration_table", "load_calibration", "parse_calibration"]
