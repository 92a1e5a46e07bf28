"""Analytical simulators: closed-form and timeline models fast enough for every candidate."""

from simulators.analytical._training import TrainingResult, simulate_training

__all__ = ["TrainingResult", "simulate_training"]
