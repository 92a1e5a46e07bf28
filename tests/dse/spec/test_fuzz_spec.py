"""Fuzz the spec reader: a mutated tiny spec is either a study or one DseError line, never a traceback.

Mutations set any field of the Study model (walked from its pydantic fields, so new fields are
fuzzed too) or a random key to values of the wrong type, NaN/inf, huge or negative numbers,
ranges of 10^12 values and nested junk; a second test splices random text into the YAML.
"""

import tempfile
from datetime import timedelta
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from dse.errors import DseError
from dse.spec import Study, load_study
from dse.study import resolve_study
from tests.conftest import TINY_SPEC

FUZZ = settings(
    max_examples=120,
    deadline=timedelta(seconds=5),  # generous: a regression is a hang or minutes, not milliseconds
    derandomize=True,  # the same examples on every run and machine
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def _field_paths(model: type[BaseModel], prefix: tuple = (), depth: int = 3) -> list[tuple[str, ...]]:
    paths = []
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        paths.append((*prefix, name))
        nested = [a for a in getattr(info.annotation, "__args__", (info.annotation,)) if isinstance(a, type)]
        for sub in nested:
            if issubclass(sub, BaseModel) and depth > 1:
                paths += _field_paths(sub, (*prefix, name), depth - 1)
    return paths


PATHS = sorted(set(_field_paths(Study)) | {("search", name) for name in ("tp", "pp", "cp", "vpp", "global_batch")})
HOSTILE_SCALARS = ["1:30", "yes", "off", "auto", "H100-SXM", "llama3-8b", "1e12", "0x10", "", "x" * 300, "/dev/zero"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2, 8, 64, 2**20, 2**32, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(HOSTILE_SCALARS),
)
ranges = st.fixed_dictionaries(
    {"low": st.integers(-5, 2**40), "high": st.integers(-5, 2**40)}, optional={"step": st.integers(-1, 2**20)}
)
values = st.recursive(
    st.one_of(scalars, ranges),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(["low", "high", "step", "metric", "x"]), inner)
    ),
    max_leaves=8,
)
mutation = st.tuples(
    st.one_of(st.sampled_from(PATHS), st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=3).map(tuple)),
    st.one_of(values, st.just("<delete>")),
)


def _assert_one_line_or_study(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            resolve_study(load_study(path))
        except DseError as exc:
            message = str(exc)
            assert message and "\n" not in message and len(message) < 2000, message


def _mutate(raw: dict, path: tuple, value) -> None:
    node = raw
    for key in path[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value == "<delete>":
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value


@FUZZ
@given(st.lists(mutation, min_size=1, max_size=3))
def test_mutated_specs_are_a_study_or_one_error_line(mutations):
    raw = yaml.safe_load(TINY_SPEC)
    for path, value in mutations:
        _mutate(raw, path, value)
    _assert_one_line_or_study(yaml.safe_dump(raw, allow_unicode=True))


@FUZZ
@given(st.integers(0, len(TINY_SPEC)), st.text(min_size=1, max_size=40))
def test_text_spliced_into_a_spec_is_a_study_or_one_error_line(at, junk):
    _assert_one_line_or_study(TINY_SPEC[:at] + junk + TINY_SPEC[at:])
