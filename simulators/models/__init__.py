"""The model zoo: dense and mixture-of-experts transformer shapes (GQA or latent attention) and their
parameter counts."""

from simulators.models._model import ModelSpec, get_model, model_catalog

__all__ = ["ModelSpec", "get_model", "model_catalog"]
