"""`dse batch`: many studies at once on one Ray cluster, sharing its workers and one cache.

Each study runs in its own driver thread with its own storage and report directory
(`<out>/<study name>/`, exactly what `dse search` writes); all of them send their candidates to
one executor, so the cluster's CPUs serve whichever study has work, and all of them read and
extend one content-addressed cache (`<out>/cache.jsonl`, dse.search.cache), so a candidate two studies
share is simulated once. Every spec is loaded and checked before any study starts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dse.errors import DseError, SpecError
from dse.search.cache import SharedCache
from dse.search.engine import RunSettings, SearchSummary, run_search, stop_on_sigint
from dse.search.executor import Usage
from dse.search.local_executor import make_executor
from dse.spec import load_study
from dse.spec.resolved import ResolvedStudy
from dse.study import resolve_study

CACHE_FILE = "cache.jsonl"
BATCH_FILE = "batch.yaml"  # the studies of the batch, for `dse report` on the batch directory


@dataclass(frozen=True)
class BatchRun:
    """One study of a batch as it ran (its output in `resolved.study.output_dir`)."""

    resolved: ResolvedStudy
    summary: SearchSummary


@dataclass(frozen=True)
class BatchSummary:
    runs: list[BatchRun]
    wall_s: float
    usage: Usage
    cached_before: int  # outcomes the cache file held when the batch began


def load_batch(
    paths: Sequence[Path], out_dir: Path, overrides: dict[str, Any], fidelity: str | None = None
) -> list[tuple[Path, ResolvedStudy]]:
    """Every spec loaded and checked, each study's output set to `<out_dir>/<name>` (and its
    ladder climbed no higher than `fidelity`, when given); a bad spec stops the batch before
    anything runs, with the file it came from in the message."""
    if not paths:
        raise SpecError("batch: give at least one spec")
    loaded: list[tuple[Path, ResolvedStudy]] = []
    seen: dict[str, Path] = {}
    for path in paths:
        try:
            study = load_study(path, **overrides)
            if study.name in seen:
                raise SpecError(
                    f"name: {study.name!r} is also the name of {seen[study.name]}; each study of a batch needs its own"
                )
            seen[study.name] = path
            update: dict[str, Any] = {"output": str(out_dir / study.name), "storage": None}
            if fidelity:
                update["fidelity"] = study.fidelity.up_to(fidelity)
            study = study.model_copy(update=update)
            loaded.append((path, resolve_study(study)))
        except DseError as exc:
            raise type(exc)(f"{path}: {exc}") from None
    return loaded


def run_batch(
    studies: list[tuple[Path, ResolvedStudy]],
    out_dir: Path,
    ray_address: str,
    resume: bool,
    on_study: Callable[[ResolvedStudy], tuple[Callable, Callable]],
) -> BatchSummary:
    """Run every study to its budget at once; `on_study` gives each study's (on_start, on_trial)
    callbacks. The first Ctrl-C stops every study after the chunk in hand."""
    out_dir.mkdir(parents=True, exist_ok=True)
    listing = [{"name": r.study.name, "spec": str(p), "dir": r.study.name} for p, r in studies]
    (out_dir / BATCH_FILE).write_text(yaml.safe_dump({"studies": listing}, sort_keys=False))
    cache = SharedCache(out_dir / CACHE_FILE)
    cached_before = len(cache)
    executor = make_executor(ray_address)
    started = time.monotonic()
    try:
        with stop_on_sigint() as stop, ThreadPoolExecutor(max_workers=len(studies)) as pool:

            def one(resolved: ResolvedStudy) -> BatchRun:
                on_start, on_trial = on_study(resolved)
                settings = RunSettings(resolved.study.output_dir, None, ray_address, resume)
                try:
                    summary = run_search(
                        resolved,
                        settings,
                        on_trial,
                        on_start,
                        executor=executor,
                        stop=stop,
                        shared=cache,
                        studies_sharing=len(studies),
                    )
                except BaseException:
                    stop.set()  # one study failing stops the others cleanly
                    raise
                return BatchRun(resolved, summary)

            futures = [pool.submit(one, resolved) for _, resolved in studies]
            runs = [_result(future, stop) for future in futures]
    finally:
        executor.close()
        cache.close()
    return BatchSummary(runs, time.monotonic() - started, executor.usage, cached_before)


def _result(future, stop: threading.Event) -> BatchRun:
    """A study's run; waits in short steps so the main thread still sees a second Ctrl-C."""
    while True:
        try:
            return future.result(timeout=0.2)
        except TimeoutError:
            continue
        except KeyboardInterrupt:  # the second Ctrl-C: the studies still stop after their chunk
            stop.set()
            raise
