"""Name-keyed registries with "did you mean" answers (STYLE 4)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from simulators._errors import CatalogError

T = TypeVar("T")


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
                raise CatalogError(
                    f"{self._kind} {key!r} is registered twice (as {self._keys[low]!r} and {name!r})"
                )
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

    def unknown_message(self, name: str, field: str) -> str:
        close = difflib.get_close_matches(str(name).lower(), list(self._keys), n=1, cutoff=0.6)
        hint = f" (did you mean {self._keys[close[0]]!r}?)" if close else ""
        return (
            f"{field}: {name!r} is not a known {self._kind}{hint}; "
            f"allowed: {', '.join(self._entries)}"
        )

    def __getitem__(self, name: str) -> T:
        return self._entries[self._keys[name.lower()]]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._keys
