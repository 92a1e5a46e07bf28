"""The spec's `reliability:` section: checkpointing, hot spares and overrides of the failure
catalogue (simulators/reliability). Training studies only; the goodput metrics read it after the
step is simulated, so it never changes a cached step."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from dse.spec.fields import Frozen
from simulators.reliability import COMPONENTS, RESTART_STEPS, ReliabilityConfig, storage_names

MAX_SECONDS = 1e8  # about three years


class ReliabilitySettings(Frozen):
    # Where checkpoints are written (simulators/reliability/storage.yaml).
    checkpoint_storage: str = "parallel-fs"
    # sync: training waits for the write; async: only for the device-to-host copy; in_memory:
    # the copy goes to a peer's host memory (simulators/reliability/_checkpoint.py).
    checkpoint_mode: Literal["sync", "async", "in_memory"] = "async"
    # The spares and the checkpoint interval are knobs: search.spare_servers, search.checkpoint_interval_s.
    # Interruptions per component-day replacing the observed run's (failures.yaml).
    rates_per_day: dict[Literal[COMPONENTS], Annotated[float, Field(ge=0, le=1)]] = {}
    # Planned stops a day (maintenance right after a checkpoint: a relaunch, no lost work),
    # replacing the observed run's 47 in 54 days.
    planned_stops_per_day: float | None = Field(default=None, ge=0, le=100)
    # Seconds of the restart steps replacing the catalogue's.
    restart_s: dict[Literal[RESTART_STEPS], Annotated[float, Field(ge=0, le=MAX_SECONDS)]] = {}

    @field_validator("checkpoint_storage")
    @classmethod
    def _storage(cls, value: str) -> str:
        if value not in storage_names():
            raise ValueError(f"{value!r} is not allowed; allowed: {', '.join(storage_names())}")
        return value

    def config(self, spare_servers: int = 0, interval_s: float | None = None) -> ReliabilityConfig:
        """The settings with a candidate's spares and checkpoint interval (None: Daly's optimum)."""
        return ReliabilityConfig(
            storage=self.checkpoint_storage,
            mode=self.checkpoint_mode,
            interval_s=interval_s,
            spare_servers=spare_servers,
            rates_per_day=tuple(sorted(self.rates_per_day.items())),
            planned_stops_per_day=self.planned_stops_per_day,
            restart_s=tuple(sorted(self.restart_s.items())),
        )
