"""Command-line flag types: every number finite and inside a stated range, every usage error one line.

argparse's own `type=float` takes `nan`, `inf` and negatives, which then fail deep inside a run
(`--max-mb nan` ends in a ValueError traceback); these types refuse them where they are typed,
naming the flag and the allowed range. The parser prints a usage error as one line, like every
other error of the CLI, with a pointer to `--help` instead of the multi-line usage block.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line on stderr and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def integer(low: int, high: int) -> Callable[[str], int]:
    """A flag type: a decimal integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer; allowed: {low} to {high}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: {low} to {high}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its messages
    return parse


def positive(high: float) -> Callable[[str], float]:
    """A flag type: a finite number in (0, high]."""
    return _number(high, zero=False)


def non_negative(high: float) -> Callable[[str], float]:
    """A flag type: a finite number in [0, high]."""
    return _number(high, zero=True)


def _number(high: float, *, zero: bool) -> Callable[[str], float]:
    allowed = f"allowed: a finite number {'at least' if zero else 'above'} 0, at most {high:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number; {allowed}") from None
        if not (math.isfinite(value) and (0 <= value if zero else 0 < value) and value <= high):
            raise argparse.ArgumentTypeError(f"{text} is out of range; {allowed}")
        return value

    parse.__name__ = "number"
    return parse


def stage(text: str) -> int | str:
    """A flag type: a pipeline stage number, or `busiest` or `all` (checked against the plan's
    pp where the plan is known)."""
    if text in ("busiest", "all"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}; allowed: busiest, all or a stage number from 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is out of range; allowed: busiest, all or a stage number from 0")
    return value


# The ranges, stated once: budgets far beyond any study, and what one machine can replay.
TRIALS = integer(1, 10**8)
TIMEOUT_S = positive(10**7)  # about 116 days
SEED = integer(0, 2**32 - 1)  # numpy's seed range, which every sampler draws from
TOP = integer(1, 1000)
MAX_RANKS = integer(2, 1024)
MAX_MB = positive(4096)  # MiB per replayed collective: each rank holds a buffer this size
NUM_GPUS = integer(1, 10**6)
NIC_GBPS = positive(10**5)
ECMP_CONVERGENCE_S = non_negative(3600)
