"""Measured corrections of collective times by message size, per operation and level.

Why: the alpha-beta model with a fixed efficiency reaches a collective's plateau bus bandwidth
(large messages, within a few per cent of nccl-tests) but is optimistic for mid-size messages
(1-64 MiB, about +29 % against ../shared/validation/collectives.csv), where NCCL runs fewer
channels and its pipeline has not filled. A user who measured their own system with nccl-tests
(`dse calibrate nccl-tests`) gets, for each operation and for groups inside one scale-up domain
(`scale-up`) or spanning several (`scale-out`), the measured time over the modelled one at each
measured size. Between sizes the factor is interpolated linearly in log(size); beyond the
smallest and largest measured size it is held at the end value; an operation or level that was
not measured keeps the model's time (factor 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulators._errors import SpecError

SCALES = ("scale-up", "scale-out")


@dataclass(frozen=True)
class CollectiveCurve:
    """Measured / modelled time of `op` on groups at `scale`, at increasing `sizes_bytes`."""

    op: str
    scale: str
    sizes_bytes: tuple[float, ...]
    factors: tuple[float, ...]

    def __post_init__(self) -> None:
        where = f"calibration[{self.op}, {self.scale}]"
        if self.scale not in SCALES:
            raise SpecError(f"{where}.scale: {self.scale!r} is not allowed; allowed: {', '.join(SCALES)}")
        sizes, factors = tuple(map(float, self.sizes_bytes)), tuple(map(float, self.factors))
        object.__setattr__(self, "sizes_bytes", sizes)
        object.__setattr__(self, "factors", factors)
        if not sizes or len(sizes) != len(factors):
            raise SpecError(f"{where}: needs one factor per size, at least one; got {len(sizes)} and {len(factors)}")
        if any(not (math.isfinite(s) and s > 0) for s in sizes) or any(b <= a for a, b in zip(sizes, sizes[1:])):
            raise SpecError(f"{where}.sizes_bytes: {sizes} is not allowed; allowed: increasing numbers > 0")
        if any(not (math.isfinite(f) and f > 0) for f in factors):
            raise SpecError(f"{where}.factors: {factors} is not allowed; allowed: finite numbers > 0")

    def factor(self, nbytes: np.ndarray) -> np.ndarray:
        """The factor at each size (log-linear between measured sizes, held beyond them)."""
        log_size = np.log(np.maximum(np.asarray(nbytes, dtype=float), 1.0))
        return np.interp(log_size, np.log(self.sizes_bytes), self.factors)


@dataclass(frozen=True)
class CollectiveCalibration:
    """The measured curves of one system; `source` says where they came from."""

    curves: tuple[CollectiveCurve, ...]
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "curves", tuple(self.curves))
        keys = [(c.op, c.scale) for c in self.curves]
        if len(set(keys)) != len(keys):
            raise SpecError(f"calibration: an operation and scale measured twice among {keys}")

    def factor(self, op: str, nbytes: np.ndarray, scale_out: np.ndarray) -> np.ndarray:
        """Measured / modelled time of `op` at each size, for groups inside one scale-up domain
        (`scale_out` False) or across several (True); 1 where nothing was measured."""
        nbytes, scale_out = np.broadcast_arrays(np.asarray(nbytes, dtype=float), np.asarray(scale_out, dtype=bool))
        out = np.ones(nbytes.shape)
        for curve in self.curves:
            if curve.op == op:
                mask = scale_out if curve.scale == "scale-out" else ~scale_out
                out = np.where(mask, curve.factor(nbytes), out)
        return out
