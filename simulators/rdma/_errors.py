"""Errors of a traffic replay, in dse's one error family (STYLE 6)."""

from __future__ import annotations

from simulators._errors import DseError


class ReplayError(DseError, RuntimeError):
    """A replay could not finish: a transport failed, a peer went away or a rank timed out."""


class MismatchError(ReplayError):
    """A byte a rank received or computed differs from the independently computed value.

    `step` is the step index within the collective (buckets concatenated), None when the byte was
    last written by the local prologue; `offset` is the byte offset in the rank's result for the
    final check, or in the received chunk for a per-step checksum.
    """

    def __init__(self, message: str, rank: int, step: int | None, offset: int | None) -> None:
        super().__init__(message)
        self.rank, self.step, self.offset = rank, step, offset

    def __reduce__(self):  # crosses process boundaries (multiprocessing, Ray) intact
        return type(self), (str(self), self.rank, self.step, self.offset)
