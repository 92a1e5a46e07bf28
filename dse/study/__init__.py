"""Resolving a spec into a study: its kind (training, inference), catalogue names and checks."""

from dse.study import inference, training  # noqa: F401  (each registers its kind)
from dse.study.resolve import resolve_study

__all__ = ["resolve_study"]
