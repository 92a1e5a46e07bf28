"""The metric vocabulary: one name per quantity, units in the name (../shared/DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass

from simulators._registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str
    better: str  # "minimize" or "maximize": the direction an objective takes by default
    meaning: str
    needs: str | None = None  # spec field that must be set for the metric to exist


TRAINING_METRICS: Registry[Metric] = Registry("training metric")
for _metric in (
    Metric("iteration_time_s", "minimize", "wall time of one optimizer step"),
    Metric("tokens_per_s", "maximize", "training tokens per second, whole job"),
    Metric("tokens_per_s_per_gpu", "maximize", "training tokens per second per GPU"),
    Metric("mfu", "maximize", "model FLOPs utilisation (0-1) against the dense peak of the precision"),
    Metric("hfu", "maximize", "hardware FLOPs utilisation (0-1), recomputation included"),
    Metric("memory_gb_per_gpu", "minimize", "peak per-GPU memory of the plan, GB"),
    Metric("usd_per_hour", "minimize", "rental cost of the GPUs, $/hour"),
    Metric("usd_per_mtok", "minimize", "rental cost per million training tokens, $"),
    Metric("time_to_train_days", "minimize", "days to train on training.train_tokens", "training.train_tokens"),
    Metric("cost_to_train_usd", "minimize", "rental cost of training.train_tokens, $", "training.train_tokens"),
):
    TRAINING_METRICS.register(_metric.name, _metric)

DIRECTIONS = ("minimize", "maximize")
