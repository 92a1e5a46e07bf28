"""Analytical simulators: cost models and event timelines fast enough for every candidate."""

from simulators.analytical._training import TrainingResult, simulate_training, simulate_training_batch

__all__ = ["TrainingResult", "simulate_training", "simulate_training_batch"]
