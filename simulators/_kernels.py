"""Numba helpers that carry one signature without compiling it at import, and a look in numba's
disk cache.

numba compiles a function called with a constant once per constant (`Literal[int](6)` is a type
of its own): the packet engine's event-queue push, called with each event kind, compiled 15
times until it was given its signature. A signature given to `numba.njit` compiles the helper,
or loads it from the disk cache, when its module is imported: ~15 ms a helper on a warm cache,
a second a module on a fresh one, though an engine loaded whole from the cache never calls them
apart (its code holds theirs). `SignedHelpers` holds the signatures back until an engine that
calls the helpers is about to compile (`before`); an engine found in the cache needs none.
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import Any

import numba


class SignedHelpers:
    """The helpers of one engine, each with its one signature, given when `before` finds the
    engine about to compile. Should the cache look whole and fail to load, the engine compiles
    with unsigned helpers: once per constant, slower to compile, the same code."""

    def __init__(self) -> None:
        self._pending: list[tuple[Any, Any]] = []
        self._lock = threading.Lock()

    def njit(self, signature: Any, **options: Any) -> Callable[[Callable], Any]:
        """`numba.njit(cache=True, **options)`, with `signature` given in `before`."""

        def wrap(function: Callable) -> Any:
            dispatcher = numba.njit(cache=True, **options)(function)
            self._pending.append((dispatcher, signature))
            return dispatcher

        return wrap

    def before(self, engine: Any) -> None:
        """Call before `engine`'s first call in a process: unless it is compiled already or its
        disk cache holds it, compile each helper for its signature alone (thread-safe)."""
        if not self._pending or engine.overloads or in_disk_cache(engine):
            return
        with self._lock:
            for dispatcher, signature in self._pending:
                dispatcher.compile(signature)
                dispatcher.disable_compile()
            self._pending.clear()


def in_disk_cache(kernel: Any) -> bool:
    """Whether numba's disk cache holds `kernel` for its source as it is now. It reads numba's
    cache index and looks for the data files it names (internals of numba.core.caching, which
    writes the index before the data: an index alone is a kernel still being saved); any
    surprise there reads as not cached."""
    try:
        cache_file = kernel._cache._cache_file
        overloads = cache_file._load_index()
        return bool(overloads) and all(os.path.exists(cache_file._data_path(n)) for n in overloads.values())
    except (AttributeError, OSError, EOFError, ValueError, pickle.UnpicklingError):
        return False
