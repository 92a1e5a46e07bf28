"""Pydantic's validation errors as one line: `field.path: what is wrong; allowed: ...`."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from dse.spec.inputs import brief


def one_line(exc: ValidationError, root: type[BaseModel]) -> str:
    """The most telling validation error as `field.path: what is wrong; allowed: ...`.

    For a union (a knob given as a list or a range, a model given by name or inline) pydantic
    reports every branch; the branch whose error goes deeper than "wrong type", else the one whose
    error lies deepest in the input, is the one the user meant.
    """

    tags = _search_tags(root)

    def field_path(err: dict) -> list:
        return [p for i, p in enumerate(err["loc"]) if not _union_tag(err["loc"], i, tags)]

    err = max(exc.errors(), key=lambda e: (not e["type"].endswith("_type"), len(field_path(e))))
    loc = field_path(err)
    path = "".join(
        f"[{p}]" if isinstance(p, int) else f".{p}" if _FIELD_NAME.fullmatch(p) else f"[{brief(p)}]" for p in loc
    )
    path = path.lstrip(".") or "spec"
    kind, msg = err["type"], err["msg"]
    if kind == "extra_forbidden":
        return f"{path}: unknown field; allowed: {', '.join(_allowed_fields(err['loc'][:-1], root, tags))}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "literal_error":
        return f"{path}: {brief(err['input'])} is not allowed; {msg.replace('Input should be', 'allowed:')}"
    if kind == "value_error":
        return f"{path}: {msg.removeprefix('Value error, ')}"
    return f"{path}: {brief(err['input'])}: {msg}"


_FIELD_NAME = re.compile(r"[\w.+-]{1,80}")  # a key quoted in an error path otherwise
_UNION_TAGS = {"list[int]", "IntRange", "str", "constrained-str", "ModelSpec", "list[bool]", "TokenBounds"}


def _search_tags(root: type[BaseModel]) -> set[str]:
    """The tags of `search`'s discriminated union (the study modes); elsewhere `training` is a field."""
    return {m.model_fields["kind"].default for m in _models_in(root.model_fields["search"].annotation)}


def _union_tag(loc: tuple, i: int, tags: set[str]) -> bool:
    """Whether loc[i] names a union member pydantic adds to the path, not a field."""
    part = loc[i]
    if not isinstance(part, str):
        return False
    return part in _UNION_TAGS or "[" in part or (part in tags and i > 0 and loc[i - 1] == "search")


def _allowed_fields(loc: list, root: type[BaseModel], tags: set[str]) -> list[str]:
    """Field names of the model found by walking `loc` from `root` (through lists and unions)."""
    model: type[BaseModel] = root
    nested: list[type[BaseModel]] = []
    for i, part in enumerate(loc):
        if isinstance(part, int):
            continue
        tagged = [m for m in nested if m.model_fields.get("kind") and m.model_fields["kind"].default == part]
        if tagged:  # a discriminated union's tag picks its member
            model = tagged[0]
            continue
        if _union_tag(loc, i, tags):
            continue
        nested = _models_in(model.model_fields[part].annotation)
        if not nested:
            break
        model = nested[0]
    return [name for name, info in model.model_fields.items() if not info.exclude]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models_in(arg)]
