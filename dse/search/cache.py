"""The shared, content-addressed cache of candidate evaluations (issue 8: batches of studies).

A candidate's address is a digest of everything its evaluation depends on: the model, the GPU
catalogue entries, the fixed hardware, fabric, workload and cost settings, the files those name
(by content), the simulator code itself, and the candidate's own plan. Two studies that ask for
the same address share one simulation, even while both run: the first to claim an address
simulates it; the other waits for the result instead of simulating it again. What is cached is
the outcome before a study's prices and constraints (dse.evaluation.evaluate.Evaluator.judge adds those),
so studies that differ only in prices, objectives, constraints or search ranges still share.

The cache lives in the driver (workers never see it) and, given a path, in an append-only
JSON-lines file, so a later batch or `--resume` starts from every outcome already known.

Each record carries a digest of its address and outcome, and is checked when the file is read:
its keys and their types, finite numbers, and the digest. A record that fails (damaged, edited by
hand, moved to another address, or written by a dse older than the digest) is refused, counted
in one warning, and its candidate simulated again. The digest is a plain SHA-256, not a keyed
one: it catches damage and edits, not a forger who recomputes it, so a cache file is to be
trusted as much as the code that reads it. Appends and the repair of a cut last line (a driver
killed mid-write) take an exclusive flock on the file, so runs sharing one cache file never
join a record to a fragment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import sys
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from dse.errors import DseError
from dse.evaluation.outcome import Outcome
from dse.search.jsonlines import repair_tail, warn
from dse.spec.kind import StudyKind
from dse.spec.resolved import ResolvedStudy

# In each candidate's plan; the GPU file's entries are digested one by one (EvaluationContext.gpus).
_KNOB_LISTS = {"gpu": True, "gpu_catalog": True, "num_gpus": True, "fabric": {"family", "nic_gbps"}}
_FILE_FIELDS = (
    ("hardware", "calibration"),
    ("hardware", "network_calibration"),
    ("serving", "trace"),
    ("serving", "profile_mlp"),
    ("serving", "profile_attention"),
    ("serving", "profile_all_reduce"),
)


@dataclass(frozen=True)
class EvaluationContext:
    """What, besides its plan, decides a candidate's outcome in one study: a digest of the
    study's fixed settings and one of each GPU's catalogue entry."""

    settings: str
    gpus: Mapping[str, str]
    kind: StudyKind

    def address(self, params: Mapping[str, Any]) -> str:
        """The content address of one candidate of the study."""
        return _digest([self.settings, self.gpus[params["gpu"]], repr(self.kind.params_key(params))])


def evaluation_context(resolved: ResolvedStudy) -> EvaluationContext:
    """The evaluation context of a study's candidates.

    Knob lists (gpu, num_gpus, fabric families and NIC speeds) are left out: each candidate's
    own values are part of its plan. Prices, objectives, constraints, name, budget and sampler
    are left out: they do not change a simulation (each study adds its own costs and
    constraints to a shared outcome: dse.evaluation.evaluate.Evaluator.judge).
    """
    study = resolved.study
    parts: dict[str, Any] = {
        "mode": study.mode,
        "model": resolved.model.model_dump(mode="json"),
        "hardware": study.hardware.model_dump(mode="json", exclude=_KNOB_LISTS),
        **resolved.kind.work(study),  # its settings ("work") and the seed where it draws a stream
        "files": {".".join(f): _file_digest(getattr(getattr(study, f[0]), f[1])) for f in _FILE_FIELDS},
        "code": code_fingerprint(),
    }
    # Each GPU's entry with the share of modelled speed its stack sustains in this study.
    gpus = {
        gpu.name: _digest([gpu.model_dump(mode="json"), resolved.compute_fraction[gpu.name]]) for gpu in resolved.gpus
    }
    return EvaluationContext(_digest(parts), gpus, resolved.kind)


@cache
def code_fingerprint() -> str:
    """A digest of the simulator and evaluation code and data: a cache file written by another
    version of dse is not trusted."""
    import dse
    import simulators

    roots = [Path(dse.__file__).parent, Path(simulators.__file__).parent]
    files = sorted(p for root in roots for p in root.rglob("*") if p.suffix in (".py", ".yaml", ".csv", ".json"))
    digest = hashlib.sha256()
    for path in files:
        digest.update(str(path.relative_to(roots[0].parent)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


class SharedCache:
    """Outcomes by address, shared by every study of a batch (threads of one driver)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._outcomes: dict[str, Outcome] = {}
        self._pending: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self._file = _open(path) if path is not None else None
        if self._file is not None:
            with _locked(self._file):
                repair_tail(self._file, path)
                self._load()

    def _load(self) -> None:
        """Take every valid record of the file; warn once about those refused."""
        self._file.seek(0)
        refused: Counter[str] = Counter()
        first: dict[str, int] = {}
        for number, line in enumerate(self._file, start=1):
            record = _parse(line)
            if isinstance(record, str):
                refused[record] += 1
                first.setdefault(record, number)
            else:
                self._outcomes[record[0]] = record[1]
        if refused:
            why = "; ".join(f"{n} {problem} (first at line {first[problem]})" for problem, n in refused.items())
            warn(f"{self.path}: refused {refused.total()} records ({why}); their candidates are simulated again")

    def __len__(self) -> int:
        return len(self._outcomes)

    def claim(self, addresses: Sequence[str]) -> tuple[dict[int, Outcome], list[int], list[int]]:
        """Split positions of `addresses` into known outcomes, those the caller must simulate
        (now claimed by it), and those another study is simulating right now."""
        known, mine, theirs = {}, [], []
        with self._lock:
            for i, address in enumerate(addresses):
                if address in self._outcomes:
                    known[i] = self._outcomes[address]
                elif address in self._pending:
                    theirs.append(i)
                else:
                    self._pending[address] = threading.Event()
                    mine.append(i)
            self.hits += len(known)
        return known, mine, theirs

    def put(self, address: str, outcome: Outcome) -> None:
        """Store a claimed address's outcome (failed ones are not stored: they may be transient)."""
        with self._lock:
            if not outcome.failed:
                self._outcomes[address] = outcome
                if self._file is not None and _finite(outcome):
                    with _locked(self._file):
                        repair_tail(self._file, self.path)  # another run sharing the file was killed mid-line
                        self._file.write(_record_line(address, outcome))
                        self._file.flush()
            event = self._pending.pop(address, None)
        if event is not None:
            event.set()

    def release(self, addresses: Sequence[str]) -> None:
        """Give up claims never put (an interrupted study): their waiters simulate them."""
        with self._lock:
            events = [self._pending.pop(a) for a in addresses if a in self._pending]
        for event in events:
            event.set()

    def wait(self, address: str) -> Outcome | None:
        """The outcome of an address another study claimed, once it is there; None if that
        study gave it up (or its evaluation failed)."""
        with self._lock:
            event = self._pending.get(address)
        if event is not None:
            event.wait()
        with self._lock:
            outcome = self._outcomes.get(address)
            self.hits += outcome is not None
        return outcome

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


_RECORD_KEYS = frozenset({"address", "digest", *(f.name for f in dataclasses.fields(Outcome))})
_NUMBERS = ("metrics", "constraints")  # the fields of an outcome that map names to numbers


def _open(path: Path):
    """The cache file for reading and appending; only a regular file (a FIFO or /dev/zero would
    be read without end)."""
    if path.exists() and not path.is_file():
        raise DseError(f"cache: {path} is not a regular file")
    try:
        return path.open("a+b")
    except OSError as exc:
        raise DseError(f"cache: cannot open {path} ({exc.strerror})") from None


@contextlib.contextmanager
def _locked(file) -> Iterator[None]:
    fcntl.flock(file.fileno(), fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(file.fileno(), fcntl.LOCK_UN)


def _record_line(address: str, outcome: Outcome) -> bytes:
    content = {"address": address, **dataclasses.asdict(outcome)}
    return (json.dumps({**content, "digest": _record_digest(content)}) + "\n").encode()


def _record_digest(content: Mapping[str, Any]) -> str:
    """What ties a record's outcome to its address: the digest of both, canonically written."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _parse(line: bytes) -> tuple[str, Outcome] | str:
    """A record's address and outcome, or what is wrong with it."""
    try:
        record = json.loads(line)
    except ValueError:  # not UTF-8, not JSON, or an integer of more digits than Python converts
        return "not JSON"
    if not isinstance(record, dict):
        return "not a JSON object"
    missing, extra = sorted(_RECORD_KEYS - record.keys()), sorted(record.keys() - _RECORD_KEYS)
    if extra:
        return f"with unexpected keys {', '.join(map(repr, extra))}"
    if missing == ["digest"]:
        return "without a digest (written by an older dse)"
    if missing:
        return f"without {', '.join(missing)}"
    address, digest = record.pop("address"), record.pop("digest")
    if not isinstance(address, str) or not address or not isinstance(digest, str):
        return "with an address or digest that is not a string"
    if not all(isinstance(record[k], dict) and all(map(_number, record[k].values())) for k in _NUMBERS):
        return "with a metric or constraint that is not a finite number"
    if not isinstance(record["reason"], str | None) or record["error"] is not None:
        return "with a reason that is not a string, or an error (failures are not stored)"
    if digest != _record_digest({"address": address, **record}):
        return "whose digest does not match its content (damaged or edited)"
    return address, Outcome(**record)


def _number(value: Any) -> bool:
    """A finite number a float holds (an integer too large for one is refused, not an OverflowError)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and abs(value) <= sys.float_info.max


def _finite(outcome: Outcome) -> bool:
    """Whether an outcome can be stored: a non-finite number would be refused when read back."""
    return all(map(_number, [*outcome.metrics.values(), *outcome.constraints.values()]))


def _file_digest(path: str | None) -> str | None:
    if path is None:
        return None
    file = Path(path)
    return hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() else path


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
