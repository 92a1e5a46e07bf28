"""Hostile inputs through the real command line: tracebacks, hangs, wrong acceptances and peak memory.

Why: a spec or data file may come from anyone on a shared cluster; each must end in one
`dse: error:` line and exit 2, quickly and in little memory. This runs every file of
tests/data/hostile through `dse search` and `dse simulate`, plus inputs too big or too odd to keep
in the tree (a 50 MB spec, a 1 MB name, a 1 MB knob list, /dev/zero, a FIFO, a directory, as the
spec and as the calibration, trace and workload files a spec or command names), each in its own
subprocess under an address-space limit and a timeout. The last line is the summary.

    python benchmarks/hostile_inputs.py [--timeout 30] [--memory-mb 2048] [--jobs 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "data" / "hostile"
sys.path.insert(0, str(ROOT))
from tests.conftest import TINY_SPEC  # noqa: E402


@dataclass(frozen=True)
class Case:
    label: str
    args: tuple[str, ...]  # after `python -m dse`
    expect: str = ""  # what stderr must contain besides `dse: error:`


@dataclass(frozen=True)
class Outcome:
    case: Case
    verdict: str  # ok, traceback, hang, accepted, unclear
    rss_mb: float
    wall_s: float
    stderr: str


def corpus_cases(out: Path) -> list[Case]:
    cases = []
    for line in (HOSTILE / "EXPECTED.tsv").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, expect = line.split("\t")
        path = str(HOSTILE / name)
        cases.append(Case(f"search {name}", ("search", path, "--out", str(out / name), "--ray-address", "off"), expect))
        cases.append(Case(f"simulate {name}", ("simulate", path), expect))
    return cases


def generated_cases(tmp: Path) -> list[Case]:
    """Inputs built here: too large for the tree, or not files at all."""
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    big = tmp / "big.yaml"
    with big.open("w") as f:
        f.write(TINY_SPEC)
        f.write(("# " + "x" * 1022 + "\n") * 50 * 1024)  # 50 MB
    name = tmp / "long_name.yaml"
    name.write_text(TINY_SPEC.replace("name: tiny", "name: " + "n" * 1_000_000))
    knob = tmp / "long_knob.yaml"
    knob.write_text(TINY_SPEC.replace("tp: [1, 2, 4]", "tp: [" + ", ".join(map(str, range(1, 130_000))) + "]"))
    bomb = tmp / "alias_bomb.yaml"
    lines = ["name: bomb", "model: llama3-8b", "a: &a [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefgh", "bcdefghi")]
    bomb.write_text("\n".join(lines) + "\n")
    budget = tmp / "budget_scalar.yaml"
    budget.write_text(TINY_SPEC.split("budget:")[0] + "budget: 5\nsampler: tpe\n")

    def naming(field: str, path: str, label: str) -> Case:
        spec = tmp / f"{label}.yaml"
        spec.write_text(TINY_SPEC.replace("  num_gpus: [8, 16]\n", f"  num_gpus: [8, 16]\n  {field}: {path}\n"))
        return Case(f"search spec with hardware.{field}: {label}", ("search", str(spec), *_off(tmp, label)), field)

    trace = tmp / "trace_fifo.yaml"
    trace.write_text(f"name: served\nmode: inference\nmodel: llama3-8b\nserving: {{trace: {fifo}}}\n")
    return [
        Case("search a 50 MB spec", ("search", str(big), *_off(tmp, "big")), "allowed: at most 1 MiB"),
        Case("search a 1 MB study name", ("search", str(name), *_off(tmp, "name")), "name:"),
        Case("search a 1 MB knob list", ("search", str(knob), *_off(tmp, "knob")), "search.tp"),
        Case("search a billion-laughs alias bomb", ("search", str(bomb), *_off(tmp, "bomb")), "alias"),
        Case(
            "search budget: 5 with --trials", ("search", str(budget), "--trials", "3", *_off(tmp, "budget")), "budget"
        ),
        Case("search /dev/zero", ("search", "/dev/zero", *_off(tmp, "zero")), "not a regular file"),
        Case("search /dev/null", ("search", "/dev/null", *_off(tmp, "null")), "not a regular file"),
        Case("search a FIFO", ("search", str(fifo), *_off(tmp, "fifo")), "not a regular file"),
        Case("search a directory", ("search", str(tmp), *_off(tmp, "dir")), "is a directory"),
        Case("simulate a FIFO", ("simulate", str(fifo)), "not a regular file"),
        naming("calibration", str(fifo), "calibration_fifo"),
        naming("network_calibration", str(fifo), "network_calibration_fifo"),
        naming("network_calibration", str(big), "network_calibration_50mb"),
        Case("search spec with serving.trace: a FIFO", ("search", str(trace), *_off(tmp, "trace")), "serving.trace"),
        Case("workload import /dev/zero", ("workload", "import", "/dev/zero", "--gpu", "H100-SXM"), "not a regular"),
        Case("workload import a FIFO", ("workload", "import", str(fifo), "--gpu", "H100-SXM"), "not a regular"),
        Case(
            "workload import a binary file", ("workload", "import", str(HOSTILE / "binary.yaml"), "--gpu", "H100-SXM")
        ),
    ]


def _off(tmp: Path, label: str) -> tuple[str, ...]:
    """A fresh output directory, no Ray and a tiny budget, should a case be accepted wrongly."""
    return ("--out", str(tmp / "out" / label), "--ray-address", "off", "--trials", "2")


def run(case: Case, timeout_s: float, memory_mb: int) -> Outcome:
    def limits() -> None:
        limit = memory_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "dse", *case.args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=ROOT,
            preexec_fn=limits,
            start_new_session=True,  # the timeout kills its whole process group
        )
        hung = threading.Event()

        def kill() -> None:
            hung.set()
            os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall_s = time.perf_counter() - start
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    lines = stderr.strip().splitlines()
    if hung.is_set():
        verdict = "hang"
    elif "Traceback" in stderr:
        verdict = "traceback"
    elif proc.returncode == 0:
        verdict = "accepted"
    elif proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("dse: error:") and case.expect in lines[0]:
        verdict = "ok"
    else:
        verdict = "unclear"  # failed, but not as one line naming the field
    return Outcome(case, verdict, usage.ru_maxrss / 1024, wall_s, stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds before a run counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space limit of each run")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="runs at a time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = corpus_cases(Path(tmp) / "out") + generated_cases(Path(tmp))
        with ThreadPoolExecutor(args.jobs) as pool:
            outcomes = list(pool.map(lambda c: run(c, args.timeout, args.memory_mb), cases))
    for o in sorted(outcomes, key=lambda o: -o.rss_mb)[:3]:
        print(f"largest: {o.rss_mb:.0f} MB, {o.wall_s:.1f} s: {o.case.label}")
    for o in outcomes:
        if o.verdict != "ok":
            print(f"{o.verdict}: {o.case.label}: {' | '.join(o.stderr.strip().splitlines()[-2:])[:300]}")
    count = {v: sum(o.verdict == v for o in outcomes) for v in ("traceback", "hang", "accepted", "unclear")}
    print(f"{count['unclear']} failed without one line naming the field (listed above)")
    print(
        f"hostile inputs: {len(outcomes)} tried, {count['traceback']} tracebacks, {count['hang']} hangs, "
        f"{count['accepted']} accepted wrongly, peak {max(o.rss_mb for o in outcomes):.0f} MB"
    )


if __name__ == "__main__":
    main()
