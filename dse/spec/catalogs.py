"""A study's own catalogues: extra GPUs (`hardware.gpu_catalog`), a model file (`model`) and a
price book (`cost.price_book`), each read once through the front door (dse.spec.inputs) when the
study is resolved.

Why here and not a registration: the search evaluates candidates in Ray workers, which never
see what the driver's process registered. The resolved study carries the entries themselves
(its GpuSpec, ModelSpec and PriceBook objects travel with it), and no simulator looks a GPU or
a model up by name, so a worker needs nothing but the resolved study it is sent.
"""

from __future__ import annotations

from pydantic import ValidationError

from dse.cost import PriceBook
from dse.errors import CatalogError, SpecError
from dse.spec.inputs import CATALOG_LIMIT, load_yaml, read_text
from simulators._registry import Registry, catalog_of, validation_line
from simulators.hardware import GpuSpec, gpu_catalog
from simulators.models import ModelSpec, get_model

MODEL_FILE_SUFFIXES = (".yaml", ".yml")  # `model: <name>` names a zoo model, `model: <file>.yaml` a file


def gpu_catalogue(path: str | None) -> Registry[GpuSpec]:
    """The GPUs a study may pick: the built-in catalogue, plus those of the file at `path`
    (same schema as simulators/hardware/gpus.yaml; a name or alias of a built-in GPU is an error)."""
    if path is None:
        return gpu_catalog()
    field = "hardware.gpu_catalog"
    rows = load_yaml(read_text(path, field, CATALOG_LIMIT), f"{field}: {path}")
    try:
        return catalog_of(rows, GpuSpec, "GPU", f"{field}: {path}", base=gpu_catalog())
    except CatalogError as exc:
        raise SpecError(str(exc)) from None


def is_model_file(name: str) -> bool:
    return name.lower().endswith(MODEL_FILE_SUFFIXES)


def study_model(model: str | ModelSpec) -> ModelSpec:
    """The model a spec names: given inline, a zoo name, or a YAML file holding one model's
    fields (ModelSpec's, MoE and MLA included; its `source` defaults to the file)."""
    if isinstance(model, ModelSpec):
        return model
    if not is_model_file(model):
        return get_model(model, "model")
    raw = load_yaml(read_text(model, "model", CATALOG_LIMIT), f"model: {model}")
    if not isinstance(raw, dict):
        raise SpecError(f"model: {model} holds {type(raw).__name__}; allowed: a mapping of model fields (name, ...)")
    try:
        return ModelSpec.model_validate({"source": f"model file {model}", **raw})
    except ValidationError as exc:
        raise SpecError(f"model: {model}: {validation_line(exc)}") from None


def study_price_book(path: str | None) -> PriceBook | None:
    """The price book of the file at `path` (every field of dse/cost/prices.yaml, each price with
    its value, as_of and source), or None: the shipped book."""
    if path is None:
        return None
    field = "cost.price_book"
    raw = load_yaml(read_text(path, field, CATALOG_LIMIT), f"{field}: {path}")
    try:
        return PriceBook.model_validate(raw)
    except ValidationError as exc:
        raise SpecError(f"{field}: {path}: {validation_line(exc)}") from None
