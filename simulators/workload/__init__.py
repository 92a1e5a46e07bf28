"""Workloads: parallel plans, the operations a training step runs, and its memory."""

from simulators.workload._memory import MemoryBreakdown, layer_activation_bytes, stage_params, training_memory
from simulators.workload._ops import Gemm, layer_forward_gemms, logits_gemm, model_flops
from simulators.workload._plan import (
    RECOMPUTE_MODES,
    ParallelPlan,
    TrainingCandidate,
    TrainingSystem,
    pp_problem,
    precision_problem,
    tp_problem,
)

__all__ = [
    "RECOMPUTE_MODES",
    "Gemm",
    "MemoryBreakdown",
    "ParallelPlan",
    "TrainingCandidate",
    "TrainingSystem",
    "layer_activation_bytes",
    "layer_forward_gemms",
    "logits_gemm",
    "model_flops",
    "pp_problem",
    "precision_problem",
    "stage_params",
    "tp_problem",
    "training_memory",
]
