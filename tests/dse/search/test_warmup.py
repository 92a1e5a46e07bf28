"""The ladder's kernels compiled ahead in another process (dse/search/warmup.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dse.search.engine as engine
import dse.search.warmup as warmup
from dse.search.engine import RunSettings, run_search
from dse.spec import load_study
from dse.study import resolve_study
from simulators.fidelity import LEVELS
from tests.conftest import FABRIC_SPEC

ROOT = Path(__file__).resolve().parents[3]


def test_nothing_starts_without_a_level_or_for_workers_elsewhere(monkeypatch):
    started = []
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda *a, **k: started.append(a))
    monkeypatch.setattr("simulators.fidelity._warmup.compiled", lambda levels: False)
    warmup.Warmup([], "off").wait("flow")
    warmup.Warmup(["flow"], "10.0.0.1:6379").wait("flow")
    warmup.Warmup(["flow"], "auto").wait("flow")
    assert started == []


def test_each_level_the_cache_lacks_compiles_in_a_process_of_its_own(monkeypatch):
    """The packet engine, the longest to compile, does not queue behind the flow engine; a level
    already in the cache starts nothing."""
    started = []

    class Running:
        def __init__(self, command, **kwargs):
            started.append(command[-2:])

        def poll(self):
            return 0

    monkeypatch.setattr(warmup.subprocess, "Popen", Running)
    monkeypatch.setattr("simulators.fidelity._warmup.compiled", lambda levels: False)
    warmup.Warmup(["flow", "packet"], "local").close()
    assert started == [["simulators.fidelity._warmup", "flow"], ["simulators.fidelity._warmup", "packet"]]
    started.clear()
    monkeypatch.setattr("simulators.fidelity._warmup.compiled", lambda levels: levels == ["flow"])
    warmup.Warmup(["flow", "packet"], "off").close()
    assert started == [["simulators.fidelity._warmup", "packet"]]


def test_a_cold_cache_gets_the_level_kernels_once(tmp_path):
    """In a process whose numba cache is an empty directory: the flow engine is not there, the
    warm-up's process puts it there, and a second warm-up finds it and starts nothing."""
    script = textwrap.dedent(
        """
        import dse.search.warmup as warmup
        from simulators.fidelity._warmup import compiled

        assert not compiled(["flow"])
        first = warmup.Warmup(["flow"], "off")
        first.wait("flow")
        first.close()
        assert compiled(["flow"])
        warmup.subprocess.Popen = None  # a second process would fail here
        warmup.Warmup(["flow"], "local").close()
        """
    )
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, check=True, timeout=600)
    (kernel,) = LEVELS["flow"].kernels()  # the flow level's model's kernel (fifo's by default)
    name = kernel.py_func.__name__
    assert list(tmp_path.rglob(f"*{name}*.nbi")) and list(tmp_path.rglob(f"*{name}*.nbc"))


def test_the_search_waits_for_each_level_in_ladder_order_and_ends_the_process(write_spec, tmp_path, monkeypatch):
    calls = []

    class Recorder:
        def __init__(self, levels, ray_address):
            calls.append(("start", tuple(levels), ray_address))

        def wait(self, level):
            calls.append(("wait", level))

        def close(self):
            calls.append(("close",))

    monkeypatch.setattr(engine, "Warmup", Recorder)
    both = FABRIC_SPEC.replace("flow: null", "flow: {top: 2, message_cap_mb: 1}")
    resolved = resolve_study(load_study(write_spec(both)))
    run_search(resolved, RunSettings(tmp_path / "out", None, "off"))
    assert calls == [("start", ("flow", "packet"), "off"), ("wait", "flow"), ("wait", "packet"), ("close",)]


def test_an_index_whose_data_is_not_written_yet_is_not_compiled(monkeypatch, tmp_path):
    """numba writes a kernel's cache index before its data: a warm-up seen between the two (and
    closed then) must not count the kernel as in the cache."""
    from simulators.fidelity._warmup import compiled

    (kernel,) = LEVELS["flow"].kernels()
    cache_file = kernel._cache._cache_file
    monkeypatch.setattr(cache_file, "_load_index", lambda: {("sig", "target"): "kernel-1.nbc"})
    monkeypatch.setattr(cache_file, "_data_path", lambda name: str(tmp_path / name))
    assert not compiled(["flow"])
    (tmp_path / "kernel-1.nbc").write_bytes(b"data")
    assert compiled(["flow"])
