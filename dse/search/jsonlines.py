"""Append-only JSON-lines files (the study journal, the outcome cache) that survive a crash.

A process killed mid-write leaves its last line cut: no trailing newline. Whatever is appended
next would join that fragment into one undecodable line in the middle of the file, where it
makes everything after it unreadable. So a cut tail is truncated before a file is read or
appended to, with a warning naming the file and how many bytes were dropped: only the entry
that was being written when the process died is lost.
"""

from __future__ import annotations

import os
import sys
from typing import BinaryIO

_CHUNK = 1 << 16


def warn(message: str) -> None:
    """One line on stderr, as the CLI prints its errors."""
    print(f"dse: warning: {message}", file=sys.stderr)


def repair_tail(file: BinaryIO, name: object) -> int:
    """Truncate `file` (open for reading and writing, binary) after its last complete line.

    Returns the bytes dropped (0 when the file is empty or ends with a newline). The caller
    holds whatever lock keeps other writers out: a tail being written is not a cut tail.
    """
    end = keep = file.seek(0, os.SEEK_END)
    if end == 0:
        return 0
    file.seek(end - 1)
    if file.read(1) == b"\n":  # the common case costs one byte read
        return 0
    while keep > 0:
        start = max(0, keep - _CHUNK)
        file.seek(start)
        chunk = file.read(keep - start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            keep = start + newline + 1
            break
        keep = start
    file.truncate(keep)
    file.flush()
    os.fsync(file.fileno())
    warn(f"{name}: its last line was cut (a crash mid-write); dropped those {end - keep} bytes")
    return end - keep
