"""What a contention-aware simulator reports of one collective: its time with every group of the
step running it at once against one group alone (simulators.fidelity levels produce these)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CongestionFactor:
    """One collective's runs: `groups` groups together against one alone, by `algorithm`."""

    op: str
    ranks: int
    stride: int
    groups: int
    alone_s: float
    together_s: float
    algorithm: str

    @property
    def factor(self) -> float:
        return self.together_s / self.alone_s
