"""Failures, checkpoints and goodput of a training job: sourced failure and storage catalogues
and the closed forms (interruption rate, checkpoint cost, Young/Daly interval, expected wall
time). No Optuna or Ray here."""

from simulators.reliability._catalog import (
    COMPONENTS,
    RESTART_STEPS,
    failure_catalog,
    storage_catalog,
    storage_names,
)
from simulators.reliability._checkpoint import BYTES_PER_PARAM, CHECKPOINT_MODES, checkpoint_cost, checkpoint_size
from simulators.reliability._goodput import (
    Goodput,
    daly_interval_s,
    goodput,
    spare_free_probability,
    wall_per_work,
    young_interval_s,
)
from simulators.reliability._interruptions import counts, interruptions, observed_rates_per_day
from simulators.reliability._job import JobGoodput, ReliabilityConfig, job_goodput

__all__ = [
    "BYTES_PER_PARAM",
    "CHECKPOINT_MODES",
    "COMPONENTS",
    "RESTART_STEPS",
    "Goodput",
    "JobGoodput",
    "ReliabilityConfig",
    "checkpoint_cost",
    "checkpoint_size",
    "counts",
    "daly_interval_s",
    "failure_catalog",
    "goodput",
    "interruptions",
    "job_goodput",
    "observed_rates_per_day",
    "spare_free_probability",
    "storage_catalog",
    "storage_names",
    "wall_per_work",
    "young_interval_s",
]
