"""The front door for files a user hands to dse: bounded, type-checked reads and a YAML loader with limits.

Why: a spec, a calibration table or a workload file may come from anyone on a shared cluster. Read
naively, a FIFO blocks forever, /dev/zero fills memory, a binary file ends in a UnicodeDecodeError
traceback, a 1 KB YAML alias bomb expands to gigabytes and YAML 1.1 turns `1:30` into 90. Here
every read is of a regular file, at most `limit` bytes (read as limit + 1 so a longer file is
caught without reading it all), UTF-8 without NUL bytes; YAML is parsed with the core schema of
YAML 1.2 (true/false only, no sexagesimal numbers, no timestamps), without aliases or merge keys,
at most MAX_DEPTH collections deep, with duplicated keys refused. Every refusal is one SpecError
line naming the field or file and what is allowed.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from dse.errors import SpecError
from simulators._yaml import SAFE_LOADER

KIB, MIB = 1 << 10, 1 << 20
SPEC_LIMIT = 1 * MIB  # a study spec: the shipped ones are under 2 KiB
CATALOG_LIMIT = 4 * MIB  # a GPU, model or price-book file: the shipped gpus.yaml is under 64 KiB
CALIBRATION_LIMIT = 16 * MIB  # a kernel calibration CSV or Vidur profile: ~100 bytes a measurement
NETWORK_CALIBRATION_LIMIT = 64 * KIB  # `dse validate --calibrate` writes a few lines
WORKLOAD_LIMIT = 256 * MIB  # a SimAI workload file: one row per layer and phase
TOPOLOGY_LIMIT = 64 * MIB  # a SimAI topology file: one line a link (a 16k-GPU fabric is a few MB)
TRACE_LIMIT = 1024 * MIB  # a request trace CSV (the Azure traces are tens of MB)
MAX_DEPTH = 50  # nesting of YAML collections; a spec needs 4
MAX_INT_DIGITS = 30  # Python refuses int() of more than 4,300 digits with a traceback


def regular_file(path: str | Path, field: str, limit: int) -> None:
    """Check that `path` is a regular file of at most `limit` bytes (for files a specialised
    reader parses itself, such as pandas for a trace)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise _unreadable(exc, path, field) from None
    _checked(info, path, field, limit)


def read_text(path: str | Path, field: str, limit: int) -> str:
    """The UTF-8 text of the regular file `path`, at most `limit` bytes; SpecError naming `field` otherwise."""
    try:
        # O_NONBLOCK: opening a FIFO without a writer returns at once (then fstat refuses it).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _unreadable(exc, path, field) from None
    try:
        _checked(os.fstat(fd), path, field, limit)
    except SpecError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise SpecError(f"{field}: {path} is larger than {_size(limit)}; allowed: at most {_size(limit)}")
    if b"\0" in data:
        raise SpecError(f"{field}: {path} holds NUL bytes (a binary or UTF-16 file); allowed: UTF-8 text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{field}: {path} is not UTF-8 ({exc.reason} at byte {exc.start}); allowed: UTF-8 text"
        ) from None


def _unreadable(exc: OSError, path: str | Path, field: str) -> SpecError:
    if isinstance(exc, FileNotFoundError):
        return SpecError(f"{field}: {path} does not exist")
    return SpecError(f"{field}: {path} cannot be read ({exc.strerror}); allowed: a readable regular file")


def _checked(info: os.stat_result, path: str | Path, field: str, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, socket or device)"
        raise SpecError(f"{field}: {path} is {kind}; allowed: a regular file")
    if info.st_size > limit:
        raise SpecError(f"{field}: {path} holds {_size(info.st_size)}; allowed: at most {_size(limit)}")


def _size(nbytes: int) -> str:
    return f"{nbytes / MIB:g} MiB" if nbytes >= MIB else f"{nbytes / KIB:g} KiB" if nbytes >= KIB else f"{nbytes} bytes"


def brief(value: Any, limit: int = 80) -> str:
    """`repr(value)` cut to `limit` characters: error lines quote what was given, not a megabyte of it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 15]}... ({len(text)} chars)"


# libyaml's parser (a 0.9 MB spec: 2 s instead of 11 s); resolving and constructing stay in
# Python either way, so the limits hold.
class _LimitedLoader(SAFE_LOADER):
    """A safe loader with the YAML 1.2 core schema and unique keys (aliases and depth are
    checked on the events first, see `_check_events`)."""

    yaml_implicit_resolvers: dict = {}

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeConstructor names it
                continue
            if first is not None:
                problem = f"key {brief(key)} is repeated (first on line {first}); allowed: each key once"
                raise ConstructorError(None, None, problem, key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        value = self.construct_scalar(node)
        if len(value.lstrip("+-")) > MAX_INT_DIGITS:
            raise ConstructorError(None, None, f"integer of more than {MAX_INT_DIGITS} digits", node.start_mark)
        if not _INT.fullmatch(value):  # only an explicit !!int reaches here with other text
            raise ConstructorError(None, None, f"{brief(value)} is not an integer", node.start_mark)
        return int(value)

    def construct_yaml_float(self, node):
        value = self.construct_scalar(node)
        if not _FLOAT.fullmatch(value) and not _INT.fullmatch(value):
            raise ConstructorError(None, None, f"{brief(value)} is not a number", node.start_mark)
        return super().construct_yaml_float(node)

    def construct_yaml_bool(self, node):
        value = self.construct_scalar(node)
        if not _BOOL.fullmatch(value):
            raise ConstructorError(None, None, f"{brief(value)} is not allowed; allowed: true, false", node.start_mark)
        return value.lower() == "true"


_BOOL = re.compile(r"true|True|TRUE|false|False|FALSE")
_INT = re.compile(r"[-+]?[0-9]+")
_FLOAT = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_NULL = re.compile(r"~|null|Null|NULL|")
# Only the types a spec holds; any other tag (!!timestamp, !!binary, !!set, !!python/...) is refused.
_LimitedLoader.yaml_constructors = {None: yaml.SafeLoader.construct_undefined}
for _tag, _construct in (
    ("str", yaml.SafeLoader.construct_yaml_str),
    ("seq", yaml.SafeLoader.construct_yaml_seq),
    ("map", yaml.SafeLoader.construct_yaml_map),
    ("null", yaml.SafeLoader.construct_yaml_null),
    ("bool", _LimitedLoader.construct_yaml_bool),
    ("int", _LimitedLoader.construct_yaml_int),
    ("float", _LimitedLoader.construct_yaml_float),
):
    _LimitedLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _construct)
for _tag, _pattern, _first in (
    ("bool", _BOOL, "tTfF"),
    ("int", _INT, "-+0123456789"),
    ("float", _FLOAT, "-+.0123456789"),
    ("null", _NULL, ["~", "n", "N", ""]),
):
    _LimitedLoader.add_implicit_resolver(
        f"tag:yaml.org,2002:{_tag}", re.compile(f"^(?:{_pattern.pattern})$"), list(_first)
    )


def _check_events(text: str) -> None:
    """Refuse aliases and deep nesting from the event stream, before anything is composed: the
    composer recurses once per level (libyaml's in C), and an alias shares a subtree that every
    later walk expands (a 1 KB "billion laughs" becomes 10^9 nodes)."""
    loader = _LimitedLoader(text)
    try:
        depth = 0
        while (event := loader.get_event()) is not None:
            if isinstance(event, yaml.AliasEvent):
                problem = f"alias *{event.anchor[:40]} is not allowed; write the value out"
                raise ComposerError(None, None, problem, event.start_mark)
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    problem = f"nesting deeper than {MAX_DEPTH} levels is not allowed"
                    raise ComposerError(None, None, problem, event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()


def load_yaml(text: str, field: str) -> Any:
    """The YAML document in `text`, parsed with the limits of the module docstring; SpecError
    naming `field` (the file) and the line otherwise."""
    try:
        _check_events(text)
        return yaml.load(text, Loader=_LimitedLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.reader.ReaderError as exc:  # a control character: no mark, a position
        line = text.count("\n", 0, exc.position) + 1
        code = exc.character
        shown = brief(chr(code)) if isinstance(code, int) and 0 <= code <= 0x10FFFF else brief(code)
        problem = f"character {shown} is not allowed; allowed: printable text, tab and newline"
        raise SpecError(f"{field} line {line} is not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError(f"{field}{where} is not valid YAML: {problem}") from None


__all__ = ["brief", "load_yaml", "read_text", "regular_file"]
