"""Numba compile seconds per kernel from an empty cache: what a fresh install pays on its first run.

Why: issue 20 asks that a fresh install's first README main job finish in <= 10 s on 2 cores, and
compiling the kernels was most of it. A child process runs with NUMBA_CACHE_DIR set to a new
temporary directory (so the user's and the checkout's caches are never read nor deleted), records
every `numba:compile` event (cumulative seconds: a kernel's time includes the overloads and
callees compiled inside it; `self s` excludes them), runs a workload, and reports. The same
workload then runs in a second child on the now-filled cache, which must compile nothing (the
cache hits) and shows the time left.

Workloads: `tiny` (default) evaluates one small llama3-8b candidate analytically and at the flow
and packet levels (the kernels and argument types the ladder uses, in a few seconds);
`main` runs the README's main job in the child (`dse search search_spaces/llama70b.yaml
--ray-address off`, output to a temporary directory) and reports its wall seconds.

    python benchmarks/compile_time.py [--workload tiny|main] [--top N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run_tiny() -> None:
    """The fidelity warm-up's small candidate through the analytical model and the flow and packet levels."""
    from simulators.analytical import simulate_training
    from simulators.fidelity._warmup import small_candidate, warm_up

    simulate_training(small_candidate())
    warm_up(["flow", "packet"])


def _run_main(out_dir: str) -> None:
    """The README's main job, in this process (no Ray), its report written under `out_dir`."""
    from dse.cli import main

    spec = str(ROOT / "search_spaces" / "llama70b.yaml")
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            main(["search", spec, "--ray-address", "off", "--out", out_dir])
        finally:
            sys.stdout = stdout


def child(workload: str, out_dir: str) -> dict:
    """Run `workload`, timing every compile; returns the records and the wall seconds."""
    from numba.core import event

    records, stack = [], []

    class Listener(event.Listener):
        def on_start(self, ev):
            stack.append((time.perf_counter(), [0.0]))

        def on_end(self, ev):
            start, inner = stack.pop()
            total = time.perf_counter() - start
            if stack:
                stack[-1][1][0] += total
            dispatcher = ev.data["dispatcher"]
            name = f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__}"
            records.append({"name": name, "args": str(ev.data["args"]), "total": total, "self": total - inner[0]})

    event.register("numba:compile", Listener())
    start = time.perf_counter()
    _run_tiny() if workload == "tiny" else _run_main(out_dir)
    return {"records": records, "wall": time.perf_counter() - start}


def run_child(workload: str, cache_dir: str, out_dir: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    cmd = [sys.executable, __file__, "--child", workload, "--out", out_dir]
    done = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(name: str, result: dict, top: int) -> None:
    per: dict[str, list[float]] = {}
    for r in result["records"]:
        acc = per.setdefault(r["name"], [0.0, 0.0, 0])
        acc[0] += r["total"]
        acc[1] += r["self"]
        acc[2] += 1
    compile_s = sum(r["self"] for r in result["records"])
    print(f"{name}: wall {result['wall']:.1f} s, compiling {compile_s:.1f} s in {len(result['records'])} compilations")
    if per:
        print(f"  {'kernel or overload':<72} {'total s':>8} {'self s':>7} {'n':>3}")
        for key, (total, own, n) in sorted(per.items(), key=lambda kv: -kv[1][0])[:top]:
            print(f"  {key[-72:]:<72} {total:8.2f} {own:7.2f} {n:3d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", choices=["tiny", "main"], default="tiny")
    parser.add_argument("--top", type=int, default=20, help="kernels listed (by cumulative seconds)")
    parser.add_argument("--child", choices=["tiny", "main"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.out)))
        return
    with tempfile.TemporaryDirectory(prefix="dse-numba-") as cache, tempfile.TemporaryDirectory() as out:
        report("fresh cache", run_child(args.workload, cache, str(Path(out) / "cold")), args.top)
        report("warm cache ", run_child(args.workload, cache, str(Path(out) / "warm")), args.top)


if __name__ == "__main__":
    main()
