"""The goodput of one training job: interruptions from its cluster, checkpoints from its plan,
restarts from the catalogue, and Daly's expected wall time from them (the entry point)."""

from __future__ import annotations

from dataclasses import dataclass, field

from simulators._errors import SpecError
from simulators.models import ModelSpec
from simulators.network import Fabric
from simulators.reliability._catalog import COMPONENTS, RESTART_STEPS, failure_catalog, storage_catalog
from simulators.reliability._checkpoint import (
    CHECKPOINT_MODES,
    CheckpointCost,
    CheckpointMode,
    CheckpointSize,
    checkpoint_cost,
    checkpoint_size,
)
from simulators.reliability._goodput import Goodput, goodput, spare_free_probability
from simulators.reliability._interruptions import Interruptions, interruptions
from simulators.workload import GIB, ParallelPlan

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class ReliabilityConfig:
    """Checkpointing and spares of a job; `rates_per_day` (component -> interruptions per
    component-day) and `restart_s` (restart step -> s) replace the catalogue's figures they name."""

    storage: str = "parallel-fs"
    mode: CheckpointMode = "async"
    interval_s: float | None = None  # None: Daly's optimum
    spare_servers: int = 0
    rates_per_day: tuple[tuple[str, float], ...] = ()
    restart_s: tuple[tuple[str, float], ...] = field(default=())
    planned_stops_per_day: float | None = None  # None: the observed run's (failures.yaml `planned`)

    def __post_init__(self) -> None:
        checks = (
            ("storage", self.storage, tuple(storage_catalog().tiers)),
            ("mode", self.mode, CHECKPOINT_MODES),
            *(("rates_per_day", name, COMPONENTS) for name, _ in self.rates_per_day),
            *(("restart_s", name, RESTART_STEPS) for name, _ in self.restart_s),
        )
        for name, value, allowed in checks:
            if value not in allowed:
                raise SpecError(f"reliability.{name}: {value!r} is not allowed; allowed: {', '.join(allowed)}")
        if self.spare_servers < 0 or (self.interval_s is not None and self.interval_s <= 0):
            raise SpecError("reliability: spare_servers >= 0 and interval_s > 0 (or null) are allowed")

    def restart_step_s(self, step: str) -> float:
        return dict(self.restart_s).get(step, failure_catalog().restart[step].value)


@dataclass(frozen=True)
class JobGoodput:
    goodput: Goodput
    interruptions: Interruptions
    size: CheckpointSize
    cost: CheckpointCost
    spare_free_probability: float

    def metrics(self) -> dict[str, float]:
        g = self.goodput
        return {
            "goodput_fraction": g.ideal,
            "interruptions_per_day": self.interruptions.total_per_day,
            "checkpoint_every_s": g.interval_s,
            "checkpoint_gib": self.size.total_bytes / GIB,
            "checkpoint_blocking_s": self.cost.blocking_s,
            "restart_s": g.restart_s,
            "checkpoint_overhead_fraction": g.checkpoint,
            "lost_work_fraction": g.lost_work,
            "restart_fraction": g.restarts,
        }


def job_goodput(
    model: ModelSpec, plan: ParallelPlan, fabric: Fabric, config: ReliabilityConfig, step_s: float | None = None
) -> JobGoodput:
    """Goodput of `plan` training `model` on its GPUs of `fabric`, a step taking `step_s` (the
    checkpoint interval is a whole number of steps; None: not rounded).

    Restart = detection + rescheduling + loading + warm-up, plus, for the share of interruptions
    that take a server out, the wait for a replacement when no hot spare is free."""
    num_gpus = plan.tp * plan.pp * plan.cp * plan.dp
    job = interruptions(fabric, num_gpus, dict(config.rates_per_day))
    size = checkpoint_size(model, plan, fabric.gpus_per_server)
    nic_gbytes = fabric.nic_gbps * fabric.nics_per_server / 8.0
    cost = checkpoint_cost(
        size, config.mode, storage_catalog().tiers[config.storage], num_gpus, fabric.gpus_per_server, nic_gbytes
    )
    step = config.restart_step_s
    in_repair = job.server_loss_per_day / SECONDS_PER_DAY * step("server_repair_s")
    free = spare_free_probability(config.spare_servers, in_repair)
    server_share = job.server_loss_per_day / job.total_per_day
    restart = (
        step("detection_s")
        + step("reschedule_s")
        + cost.load_s
        + step("warmup_s")
        + server_share * (1.0 - free) * step("no_spare_wait_s")
    )
    catalog = failure_catalog()
    planned_per_day = (
        catalog.planned.interruptions / catalog.observed.days
        if config.planned_stops_per_day is None
        else config.planned_stops_per_day
    )
    relaunch = step("reschedule_s") + cost.load_s + step("warmup_s")  # a planned stop: no detection, no wait
    result = goodput(
        job.mtbf_s,
        cost.blocking_s,
        restart,
        cost.background_s,
        config.interval_s,
        step_s,
        planned_per_day / SECONDS_PER_DAY,
        relaunch,
    )
    return JobGoodput(result, job, size, cost, free)
