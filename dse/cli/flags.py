"""Command-line flag types: every number finite and inside a stated range, every usage error one line.

argparse's own `type=float` takes `nan`, `inf` and negatives, which then fail deep inside a run
(`--max-mb nan` ends in a ValueError traceback); these types refuse them where they are typed,
naming the flag and the allowed range. The parser prints a usage error as one line, like every
other error of the CLI, with a pointer to `--help` instead of the multi-line usage block.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
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


def listed(item: Callable[[str], object]) -> Callable[[str], list]:
    """A flag type: a comma-separated list of `item`s (`128,512`), at least one."""

    def parse(text: str) -> list:
        parts = [part.strip() for part in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"{text!r} has an empty item; allowed: items separated by commas")
        return [item(part) for part in parts]

    parse.__name__ = "list"
    return parse


def one_of(allowed: tuple[str, ...]) -> Callable[[str], str]:
    """A flag type: one of `allowed`, with a did-you-mean for a near miss."""

    def parse(text: str) -> str:
        if text in allowed:
            return text
        near = difflib.get_close_matches(text, allowed, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed{hint}; allowed: {', '.join(allowed)}")

    parse.__name__ = "choice"
    return parse


# Byte units as nccl-tests and the issue write sizes: binary (KiB, MiB, GiB) and decimal (KB, MB, GB).
BYTE_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}
MAX_BYTES = 2**40


def byte_size(text: str) -> int:
    """A flag type: a size in bytes, with a unit of BYTE_UNITS or none (`1GiB`, `256MiB`, `4096`)."""
    allowed = f"allowed: a number with a unit of {', '.join(BYTE_UNITS)} (or none: bytes), 1 B to 1 TiB"
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or (match.group(2) or "B") not in BYTE_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size; {allowed}")
    value = float(match.group(1)) * BYTE_UNITS[match.group(2) or "B"]
    if not (math.isfinite(value) and 1 <= value <= MAX_BYTES and value == int(value)):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; {allowed}, a whole number of bytes")
    return int(value)


byte_size.__name__ = "size"


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
