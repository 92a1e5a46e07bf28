"""The model zoo: transformer shapes and parameter counts."""

from simulators.models._model import ModelSpec, get_model, model_catalog

__all__ = ["ModelSpec", "get_model", "model_catalog"]
