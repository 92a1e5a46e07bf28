"""Analytical simulators: cost models and event timelines fast enough for every candidate."""

from simulators.analytical._bound import floor_training_batch, step_floor_s
from simulators.analytical._chakra_export import chakra_traces_of, rank_coordinates
from simulators.analytical._collectives_report import CollectiveUse, plan_collectives
from simulators.analytical._simai_export import simai_workload_of
from simulators.analytical._stage_costs import busiest_stage
from simulators.analytical._training import TrainingResult, memory_only, simulate_training, simulate_training_batch

__all__ = [
    "busiest_stage",
    "chakra_traces_of",
    "floor_training_batch",
    "step_floor_s",
    "rank_coordinates",
    "CollectiveUse",
    "plan_collectives",
    "TrainingResult",
    "simai_workload_of",
    "simulate_training",
    "simulate_training_batch",
    "memory_only",
]
