"""Request streams for the serving simulator: when requests arrive and how many tokens each has.

Serving latency depends on the load as much as on the system, so every candidate of a study must
see the same requests: a stream is a pure function of (n, seed, parameters). The seed is split
(SeedSequence.spawn) into one generator for arrivals and one per length stream, so changing the
rate or the arrival process leaves the lengths alone (common random numbers across candidates).
Everything is drawn with numpy in one call per stream, never a Python loop over requests, and the
result is a structure of arrays, as the simulator's kernels take it (STYLE 9). The token-count
distributions are in `_lengths.py`.

Traces are the real distributions Vidur publishes (Splitwise conversation and code, arXiv
summarisation) and the public Azure LLM inference trace; see /work/shared/reference/traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from simulators._errors import SpecError
from simulators.serving._lengths import LengthDist, _count, _positive

ARRIVALS = ("poisson", "gamma", "static")

# Accepted trace layouts, tried in order: (arrival column or None, prompt column, output column).
_LAYOUTS = (
    ("arrived_at", "num_prefill_tokens", "num_decode_tokens"),  # Vidur processed trace (s)
    ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),  # Azure LLM inference trace
    (None, "num_prefill_tokens", "num_decode_tokens"),  # Vidur length-only stats
)


def _check_arrays(owner: str, arrival_s: np.ndarray | None, prompt_tokens: np.ndarray, output_tokens: np.ndarray):
    """Raise a one-line SpecError unless the columns are 1-D, typed, equally long, sorted and positive."""
    columns = (("prompt_tokens", prompt_tokens, np.int64), ("output_tokens", output_tokens, np.int64))
    if arrival_s is not None:
        columns += (("arrival_s", arrival_s, np.float64),)
    for name, array, dtype in columns:
        if not isinstance(array, np.ndarray) or array.ndim != 1 or array.dtype != dtype:
            found = type(array).__name__
            if isinstance(array, np.ndarray):
                found = f"{array.dtype} array of shape {array.shape}"
            raise SpecError(f"{owner}.{name}: {found}; allowed: a 1-D {np.dtype(dtype)} array")
        if len(array) != len(prompt_tokens):
            raise SpecError(
                f"{owner}.{name}: {len(array)} entries but prompt_tokens has {len(prompt_tokens)}; "
                "allowed: one entry per request"
            )
    for name, array in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if array.size and array.min() < 1:
            raise SpecError(f"{owner}.{name}: {array.min()} is not allowed; allowed: integers >= 1")
    if arrival_s is not None and arrival_s.size:
        if not np.all(np.isfinite(arrival_s)) or arrival_s.min() < 0:
            raise SpecError(f"{owner}.arrival_s: {arrival_s.min()} is not allowed; allowed: finite times >= 0 s")
        late = np.flatnonzero(np.diff(arrival_s) < 0)
        if late.size:
            i = late[0] + 1
            raise SpecError(
                f"{owner}.arrival_s: entry {i} ({arrival_s[i]:g} s) comes before entry {i - 1} "
                f"({arrival_s[i - 1]:g} s); allowed: non-decreasing times"
            )


class _Columns:
    """What Requests and TraceData share: their columns checked at construction, and their length."""

    _owner: ClassVar[str]  # the name errors give
    arrival_s: np.ndarray | None
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self):
        _check_arrays(self._owner, self.arrival_s, self.prompt_tokens, self.output_tokens)

    def __len__(self) -> int:
        return len(self.prompt_tokens)


@dataclass(frozen=True, eq=False)
class Requests(_Columns):
    """Structure of arrays, one entry per request, sorted by arrival time."""

    _owner: ClassVar[str] = "requests"
    arrival_s: np.ndarray  # float64[n], non-decreasing, >= 0 (the first arrival may be > 0)
    prompt_tokens: np.ndarray  # int64[n] >= 1
    output_tokens: np.ndarray  # int64[n] >= 1


@dataclass(frozen=True, eq=False)
class TraceData(_Columns):
    """A trace's requests in arrival order; `arrival_s` is None when the trace records lengths only."""

    _owner: ClassVar[str] = "trace"
    arrival_s: np.ndarray | None  # float64[n] s from the first request
    prompt_tokens: np.ndarray  # int64[n] >= 1
    output_tokens: np.ndarray  # int64[n] >= 1


# Arrival processes: times in seconds, float64[n], non-decreasing.


def poisson_arrivals(rate_qps: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Poisson process: exponential gaps of mean 1/rate_qps; the first request arrives after one gap."""
    rate_qps = _positive("rate_qps", rate_qps)
    return np.cumsum(rng.exponential(1.0 / rate_qps, _count("n", n, 0)))


def gamma_arrivals(rate_qps: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Gamma renewal process: gaps of mean 1/rate_qps and coefficient of variation cv (bursty when cv > 1).

    shape = 1/cv^2 and scale = 1/(rate_qps * shape); cv = 1 is the Poisson process in distribution.
    """
    rate_qps, cv = _positive("rate_qps", rate_qps), _positive("cv", cv)
    shape = 1.0 / cv**2
    return np.cumsum(rng.gamma(shape, 1.0 / (rate_qps * shape), _count("n", n, 0)))


def static_arrivals(n: int) -> np.ndarray:
    """Every request at time 0: an offline (throughput) benchmark."""
    return np.zeros(_count("n", n, 0))


# Traces.


def _tokens(path: Path, column: str, series) -> np.ndarray:
    """A token-count column as int64; zeros become 1 (as Vidur does: every request has a token each way)."""
    try:
        values = series.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise SpecError(f"trace {path.name}: column {column} is not numeric; allowed: integers >= 0") from None
    bad = ~np.isfinite(values) | (values < 0) | (values != np.floor(values))
    if np.any(bad):
        row = np.flatnonzero(bad)[0]
        raise SpecError(f"trace {path.name}: {column} row {row} is {values[row]}; allowed: integers >= 0")
    return np.maximum(values.astype(np.int64), 1)


def _seconds(path: Path, column: str, series) -> np.ndarray:
    """Times in seconds from the earliest: numbers are seconds, strings are datetimes (ns precision kept)."""
    import pandas as pd

    if pd.api.types.is_numeric_dtype(series):
        seconds = series.to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(seconds)):
            raise SpecError(f"trace {path.name}: {column} has a missing or infinite time; allowed: seconds")
        return seconds - seconds.min()
    try:
        stamps = pd.to_datetime(series, format="ISO8601")
    except (TypeError, ValueError):
        raise SpecError(
            f"trace {path.name}: {column} is neither seconds nor datetimes; allowed: e.g. 2023-11-16 18:15:46.6805900"
        ) from None
    if stamps.isna().any():
        raise SpecError(f"trace {path.name}: {column} has a missing time; allowed: a datetime on every row")
    ns = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64)
    return (ns - ns.min()) / 1e9  # subtract in integers first: epoch seconds in float64 lose the sub-µs digits


def _cap_tokens(prompt: np.ndarray, output: np.ndarray, max_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """Vidur's cap: take the excess over max_tokens from prompt and output in proportion to their sizes.

    Each side loses ceil(excess * side / total) tokens (exact integer ceiling), then is floored at 1;
    the total is then <= max_tokens for max_tokens >= 2.
    """
    total = prompt + output
    excess = np.maximum(total - max_tokens, 0)
    prompt_cut = -(-excess * prompt // total)
    output_cut = -(-excess * output // total)
    return np.maximum(prompt - prompt_cut, 1), np.maximum(output - output_cut, 1)


def _read_csv(path: Path, **options):
    """pandas.read_csv with its failures (unreadable, empty, not UTF-8, malformed rows) as one SpecError line."""
    import pandas as pd  # only here: importing it costs a third of a second of start-up

    try:
        return pd.read_csv(path, **options)
    except OSError as error:
        raise SpecError(f"trace: cannot read {path}: {error.strerror or error}") from None
    except pd.errors.EmptyDataError:
        raise SpecError(f"trace: {path} is empty; allowed: a CSV file with a header row") from None
    except (UnicodeDecodeError, pd.errors.ParserError) as error:
        reason = " ".join(str(error).split())
        raise SpecError(f"trace: {path} is not a UTF-8 CSV file ({reason}); allowed: CSV with a header row") from None


def load_trace(path: str | Path, max_tokens: int | None = None) -> TraceData:
    """Read a request trace CSV, its layout recognised by its (case-sensitive) column names.

    Layouts: Vidur processed traces (arrived_at s, num_prefill_tokens, num_decode_tokens); Vidur
    length-only stats (num_prefill_tokens, num_decode_tokens: arrival_s is None); the Azure LLM
    inference trace (TIMESTAMP as a datetime string or seconds, ContextTokens, GeneratedTokens).
    Rows are put in arrival order (stable) and times made seconds from the first request; zero
    token counts become 1.

    `max_tokens` caps prompt + output per request as Vidur's TraceRequestLengthGenerator does (the
    generator behind its reference runs "capped at 4,096 tokens"): the excess is taken from both
    sides in proportion to their sizes, each side keeping at least 1 token. The arXiv file is
    already filtered to <= 4,096 tokens; the Splitwise ones have 1,612 (conv) and 1,257 (code)
    longer requests.
    """
    path = Path(path)
    if max_tokens is not None:
        max_tokens = _count("max_tokens", max_tokens, 2)
    columns = list(_read_csv(path, nrows=0).columns)
    layout = next((cols for cols in _LAYOUTS if {c for c in cols if c} <= set(columns)), None)
    if layout is None:
        accepted = " | ".join("+".join(c for c in cols if c) for cols in _LAYOUTS)
        found = ", ".join((str(c) if str(c).isprintable() else repr(c))[:40] for c in columns[:20])  # binary: odd
        raise SpecError(f"trace {path.name}: columns {found}; allowed column sets: {accepted}")
    time_column, prompt_column, output_column = layout
    frame = _read_csv(path, usecols=[c for c in layout if c])
    if frame.empty:
        raise SpecError(f"trace {path.name}: no requests; allowed: at least one row")
    prompt = _tokens(path, prompt_column, frame[prompt_column])
    output = _tokens(path, output_column, frame[output_column])
    arrival_s = None
    if time_column is not None:
        arrival_s = _seconds(path, time_column, frame[time_column])
        order = np.argsort(arrival_s, kind="stable")
        arrival_s, prompt, output = arrival_s[order], prompt[order], output[order]
    if max_tokens is not None:
        prompt, output = _cap_tokens(prompt, output, max_tokens)
    return TraceData(arrival_s, prompt, output)


def make_requests(
    n: int,
    seed: int,
    *,
    rate_qps: float | None,
    arrival: str = "poisson",
    cv: float = 1.0,
    prompt: LengthDist | None = None,
    output: LengthDist | None = None,
    trace: TraceData | None = None,
) -> Requests:
    """The n requests of one seeded stream, the single entry point of the simulator and the study.

    Arrivals: `arrival` "poisson" or "gamma" (with `cv`) at `rate_qps` requests/s, or "static" (all
    at time 0; rate_qps must be None). rate_qps=None with a trace that records arrivals replays its
    first n requests as recorded (n must not exceed the trace; leave `arrival` at its default).
    Lengths: from `prompt` and `output` without a trace; otherwise the trace's own, in its order,
    and whenever the arrivals are not replayed (a rate given, a length-only trace, or static) the
    first n wrapping around to the start when n exceeds the trace (request i has row i % len).
    The same arguments give identical requests; arrivals and each length stream have their own
    generator spawned from `seed`, so the rate and arrival process never change the lengths.
    """
    n = _count("n", n)
    seed = _count("seed", seed, 0)
    if arrival not in ARRIVALS:
        raise SpecError(f"arrival: {arrival!r} is not allowed; allowed: {', '.join(ARRIVALS)}")
    cv = _positive("cv", cv)
    if rate_qps is not None:
        rate_qps = _positive("rate_qps", rate_qps)
    if trace is None and (prompt is None or output is None):
        raise SpecError("prompt, output: a length distribution is required for each without a trace")
    if trace is not None and (prompt is not None or output is not None):
        raise SpecError("prompt, output: not allowed with a trace (its own lengths are used); allowed: None")
    arrival_rng, prompt_rng, output_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(3))

    replay = trace is not None and trace.arrival_s is not None and rate_qps is None and arrival == "poisson"
    if arrival == "static":
        if rate_qps is not None:
            raise SpecError(f"rate_qps: {rate_qps:g} is not allowed with arrival 'static' (all at 0 s); allowed: None")
        arrival_s = static_arrivals(n)
    elif rate_qps is not None:
        arrival_s = (
            poisson_arrivals(rate_qps, n, arrival_rng)
            if arrival == "poisson"
            else gamma_arrivals(rate_qps, cv, n, arrival_rng)
        )
    elif replay:
        if n > len(trace):
            raise SpecError(
                f"n: {n} exceeds the {len(trace)} requests of the replayed trace; allowed: 1..{len(trace)} "
                "(or give rate_qps to draw arrivals and wrap the lengths)"
            )
        arrival_s = trace.arrival_s[:n]
    else:
        where = "" if arrival == "gamma" else " without a trace that records arrivals"
        raise SpecError(f"rate_qps: required for arrival {arrival!r}{where}; allowed: a number > 0 (requests/s)")

    if trace is None:
        return Requests(arrival_s, prompt.sample(n, prompt_rng), output.sample(n, output_rng))
    rows = np.arange(n) % len(trace)
    return Requests(arrival_s, trace.prompt_tokens[rows], trace.output_tokens[rows])
