"""Token-count distributions of a request stream, and the checks of their parameters.

Why a module of its own: a distribution is a frozen value with one `sample(n, rng)` method, the
part of a stream (`_requests.py`) that a study's `prompt` and `output` settings name; the
arrival processes and the traces build on the same checks.
"""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from simulators._errors import SpecError


def _count(field_name: str, value: object, minimum: int = 1) -> int:
    """`value` as an int >= minimum, or a SpecError naming the field."""
    try:
        count = operator.index(value)
    except TypeError:
        count = None
    if count is None or isinstance(value, bool) or count < minimum:
        raise SpecError(f"{field_name}: {value!r} is not allowed; allowed: integers >= {minimum}")
    return count


def _positive(field_name: str, value: object) -> float:
    """`value` as a finite float > 0, or a SpecError naming the field."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not np.isfinite(number) or number <= 0:
        raise SpecError(f"{field_name}: {value!r} is not allowed; allowed: a finite number > 0")
    return number


def _bounds(owner: str, low: object, high: object) -> None:
    """Raise unless low and high are token counts with low <= high."""
    if _count(f"{owner}.low", low) > _count(f"{owner}.high", high):
        raise SpecError(f"{owner}.low: {low} > high={high}; allowed: low <= high")


# Length distributions: `sample(n, rng)` returns int64[n] token counts >= 1.


class LengthDist(ABC):
    """A distribution of token counts per request."""

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n token counts, int64 >= 1, drawn from `rng`."""


@dataclass(frozen=True)
class Fixed(LengthDist):
    """Every request has `value` tokens."""

    value: int

    def __post_init__(self):
        _count("fixed.value", self.value)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, self.value, dtype=np.int64)


@dataclass(frozen=True)
class Uniform(LengthDist):
    """Integers uniform on [low, high], both included."""

    low: int
    high: int

    def __post_init__(self):
        _bounds("uniform", self.low, self.high)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.low, self.high, size=n, dtype=np.int64, endpoint=True)


@dataclass(frozen=True)
class Zipf(LengthDist):
    """Bounded Zipf: P(k) proportional to k^-theta for k in [low, high] (the count itself, not a rank).

    Sampled by inverse CDF over the finite support: one uniform per request, located in the
    normalised cumulative pmf with a binary search, so it is exact for any theta > 0.
    """

    theta: float
    low: int
    high: int

    def __post_init__(self):
        _positive("zipf.theta", self.theta)
        _bounds("zipf", self.low, self.high)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        support = np.arange(self.low, self.high + 1, dtype=np.int64)
        return _inverse_cdf(support, support.astype(np.float64) ** -float(self.theta), n, rng)


@dataclass(frozen=True)
class Geometric(LengthDist):
    """Integers k in [low, high] with P(k) proportional to q^k, q chosen so the mean is `mean`.

    Why this shape: where a source publishes only a data set's mean length and its bounds (as
    MLPerf does for its generated tokens), this is the distribution of greatest entropy with that
    mean on that support, so it assumes nothing else. Sampled by inverse CDF like `Zipf`.
    """

    mean: float
    low: int
    high: int

    def __post_init__(self):
        _positive("geometric.mean", self.mean)
        _bounds("geometric", self.low, self.high)
        if not self.low < self.mean < self.high:
            raise SpecError(
                f"geometric.mean: {self.mean!r} is not allowed; allowed: low < mean < high ({self.low}, {self.high})"
            )

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        """(support, probabilities): q solved by bisection on log q, the mean being increasing in it."""
        support = np.arange(self.low, self.high + 1, dtype=np.int64)
        offset = (support - self.low).astype(np.float64)

        def probabilities(log_q: float) -> np.ndarray:
            weights = np.exp(log_q * offset - max(log_q * offset[-1], 0.0))  # no overflow either side
            return weights / weights.sum()

        lo, hi = -50.0 / max(offset[-1], 1.0), 50.0 / max(offset[-1], 1.0)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if probabilities(mid) @ support < self.mean else (lo, mid)
        return support, probabilities((lo + hi) / 2)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return _inverse_cdf(*self.pmf(), n, rng)


def _inverse_cdf(support: np.ndarray, weights: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` draws from `support` with probabilities proportional to `weights`: one uniform each,
    located in the normalised cumulative weights by binary search (exact for any weights)."""
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]  # cdf[-1] == 1.0 exactly, and u < 1, so the index stays in the support
    return support[np.searchsorted(cdf, rng.random(n), side="right")]


@dataclass(frozen=True, eq=False)
class Empirical(LengthDist):
    """Resampling with replacement from observed token counts."""

    values: np.ndarray  # int64 >= 1, at least one

    def __post_init__(self):
        array = np.asarray(self.values)
        if array.dtype.kind not in "iuf" or array.ndim != 1 or array.size == 0:
            raise SpecError(f"empirical.values: {array.dtype} array of shape {array.shape}; allowed: integers >= 1")
        bad = ~np.isfinite(array) | (array < 1) | (array != np.floor(array))
        if np.any(bad):
            raise SpecError(f"empirical.values: {array[bad][0]} is not allowed; allowed: integers >= 1")
        object.__setattr__(self, "values", array.astype(np.int64))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.values[rng.integers(0, len(self.values), size=n)]


def fixed(value: int) -> Fixed:
    """Every request has `value` tokens."""
    return Fixed(value)


def uniform(low: int, high: int) -> Uniform:
    """Token counts uniform on [low, high], both included."""
    return Uniform(low, high)


def zipf(theta: float, low: int, high: int) -> Zipf:
    """Token counts k in [low, high] with P(k) proportional to k^-theta (inverse-CDF sampled)."""
    return Zipf(theta, low, high)


def geometric(mean: float, low: int, high: int) -> Geometric:
    """Token counts in [low, high] of greatest entropy with mean `mean` (P(k) proportional to q^k)."""
    return Geometric(mean, low, high)


def empirical(values) -> Empirical:
    """Token counts resampled with replacement from `values`."""
    return Empirical(values)
