"""What a contention-aware simulator reports of one collective: its time with every group of the
step running it at once against one group alone (simulators.fidelity levels produce these)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CongestionFactor:
    """One collective's runs: `groups` groups together against one alone, by `algorithm`;
    `nbytes` is the collective's message (the runs may cap it)."""

    op: str
    ranks: int
    stride: int
    nbytes: int
    groups: int
    alone_s: float
    together_s: float
    algorithm: str

    @property
    def key(self) -> tuple[str, int, int, int]:
        """What the training model looks the factor up by (Network.slowdown)."""
        return (self.op, self.ranks, self.stride, self.nbytes)

    @property
    def factor(self) -> float:
        return self.together_s / self.alone_s
