"""Name-keyed registries with "did you mean" answers (STYLE 4)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from importlib import resources
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from simulators._errors import CatalogError, SpecError
from simulators._yaml import safe_load

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class Registry(Mapping[str, T], Generic[T]):
    """An immutable-after-build mapping from user-facing names (and aliases) to entries.

    Lookups are case-insensitive; iteration yields canonical names in registration order.
    """

    def __init__(self, kind: str) -> None:
        self._kind = kind
        self._entries: dict[str, T] = {}
        self._keys: dict[str, str] = {}  # lower-cased name or alias -> canonical name

    def register(self, name: str, entry: T, aliases: tuple[str, ...] = ()) -> None:
        for key in (name, *aliases):
            low = key.lower()
            if low in self._keys:
                raise CatalogError(f"{self._kind} {key!r} is registered twice (as {self._keys[low]!r} and {name!r})")
            self._keys[low] = name
        self._entries[name] = entry

    def canonical(self, name: str, field: str) -> str:
        """The canonical name for `name`, or a CatalogError naming `field` and the allowed names."""
        try:
            return self._keys[str(name).lower()]
        except KeyError:
            raise CatalogError(self.unknown_message(name, field)) from None

    def lookup(self, name: str, field: str) -> T:
        return self._entries[self.canonical(name, field)]

    def choice(self, name: str, field: str) -> T:
        """`lookup` for a name a spec field chose among the entries: a SpecError (the field's
        value is not allowed) rather than a CatalogError."""
        try:
            return self.lookup(name, field)
        except CatalogError as err:
            raise SpecError(str(err)) from None

    def unknown_message(self, name: str, field: str) -> str:
        close = difflib.get_close_matches(str(name).lower(), list(self._keys), n=1, cutoff=0.6)
        hint = f" (did you mean {self._keys[close[0]]!r}?)" if close else ""
        return f"{field}: {name!r} is not a known {self._kind}{hint}; allowed: {', '.join(self._entries)}"

    def __getitem__(self, name: str) -> T:
        return self._entries[self._keys[name.lower()]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._keys


def load_catalog(package: str, filename: str, entry: type[M], kind: str) -> Registry[M]:
    """A registry of the rows of a packaged YAML list, each validated as `entry` (STYLE 5)."""
    rows = safe_load(resources.files(package).joinpath(filename).read_text())
    return catalog_of(rows, entry, kind, filename)


def catalog_of(rows: object, entry: type[M], kind: str, label: str, base: Registry[M] | None = None) -> Registry[M]:
    """A registry of `base`'s entries, then the rows of the list `rows` (from `label`), each
    validated as `entry`. Entries need `name` and `aliases`; a bad row is one CatalogError line
    naming the file, the row and the field; a name or alias `base` holds already is an error
    (an entry means one thing everywhere: prices, calibration tables and reports key by name)."""
    if not isinstance(rows, list):
        raise CatalogError(f"{label}: holds {type(rows).__name__}; allowed: a list of {kind} mappings")
    registry: Registry[M] = Registry(kind)
    for name, item in (base or {}).items():
        registry.register(name, item, item.aliases)
    for i, row in enumerate(rows):
        where = f"{label} entry {i}" + (f" ({row.get('name')})" if isinstance(row, dict) else "")
        try:
            item = entry.model_validate(row)
        except ValidationError as exc:
            raise CatalogError(f"{where}: {validation_line(exc)}") from None
        try:
            registry.register(item.name, item, item.aliases)
        except CatalogError as exc:
            raise CatalogError(f"{where}: {exc}; allowed: a name and aliases of its own") from None
    return registry


def validation_line(exc: ValidationError) -> str:
    """The first error of a validation as one line: `field: what is wrong`."""
    err = exc.errors()[0]
    field = ".".join(map(str, err["loc"]))
    message = {"missing": "required field is missing", "extra_forbidden": "unknown field"}.get(
        err["type"], err["msg"].removeprefix("Value error, ")
    )
    return f"{field}: {message}" if field else message
