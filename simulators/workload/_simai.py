"""SimAI / AICB workload files: frozen values, a strict line-numbered parser and a writer.

The format is SimAI's (astra-sim-alibabacloud `Workload.cc`), which AICB writes; see
../shared/reference/simai/FORMAT.md. Line 1 is a policy token and `key: value` pairs, line 2 the
row count, then one row per layer of 12 whitespace-separated fields in the order of `ROW_FIELDS`.
Compute times are in ns (SimAI's tick), communication sizes in bytes per rank as passed to the
collective (the whole buffer for all-gather and reduce-scatter).

SimAI reads with `>>` and never complains; this parser rejects what SimAI would silently
misread (unknown header keys, short files, fractional times), naming the source, line and field.
`format_simai_workload` writes the canonical form: single spaces in the header, `pp_comm:` with
its colon, tab-separated rows as AICB writes them.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from simulators._errors import WorkloadFormatError

# Policy tokens SimAI's decode_parallelsim knows. HYBRID_CUSTOMIZED is left out: its rows carry
# a 13th field (a per-row policy) that no AICB version writes.
POLICIES = (
    "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
    "HYBRID_TRANSFORMER",
    "DATA",
    "MODEL",
    "HYBRID_DATA_MODEL",
    "HYBRID_MODEL_DATA",
    "HYBRID_DLRM",
    "HYBRID_DLRM_ENHANCED",
    "MICRO",
    "DISTRIBUTED_INFERENCE",
)

# Header key -> SimAIHeader attribute, in the order AICB writes them (the writer's order).
HEADER_KEYS = {
    "model_parallel_NPU_group:": "tp",
    "ep:": "ep",
    "pp:": "pp",
    "vpp:": "vpp",
    "ga:": "ga",
    "all_gpus:": "all_gpus",
    "checkpoints:": "checkpoints",
    "checkpoint_initiates:": "checkpoint_initiates",
    "pp_comm:": "pp_comm_bytes",
    "DLRM_LAST_BOTTOM_LAYER:": "dlrm_last_bottom_layer",
}
# SimAI also accepts `pp_comm` without its colon (workloads/workload_analytical.txt has it).
_KEY_ALIASES = {"pp_comm": "pp_comm:"}
_LIST_KEYS = ("checkpoints:", "checkpoint_initiates:")

ROW_FIELDS = (
    "name",
    "dependency",
    "fwd_compute_ns",
    "fwd_comm",
    "fwd_comm_bytes",
    "ig_compute_ns",
    "ig_comm",
    "ig_comm_bytes",
    "wg_compute_ns",
    "wg_comm",
    "wg_comm_bytes",
    "update_ns",
)
COLUMNS = ("fwd", "ig", "wg")  # forward, input gradient (backward data), weight gradient

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
GROUP_KINDS = ("tp", "dp", "dp_ep", "ep", "pp")
_OPS = {
    "ALLREDUCE": "all_reduce",
    "ALLGATHER": "all_gather",
    "REDUCESCATTER": "reduce_scatter",
    "ALLTOALL": "all_to_all",
    "BROADCAST": "broadcast",
}
_SUFFIX_GROUPS = {"_DP_EP": "dp_ep", "_EP": "ep"}  # longest first: "_DP_EP" also ends in "_EP"
_COLUMN_GROUPS = {"fwd": "tp", "ig": "tp", "wg": "dp"}  # the group of an unsuffixed type
_UNWRITABLE = {"broadcast": "SimAI reads BROADCAST as no communication", "send_recv": "pipeline sends go in pp_comm"}

_UINT = re.compile(r"\d+")
_INT = re.compile(r"-?\d+")
_WHOLE = re.compile(r"(\d+)(?:\.0*)?")  # AICB writes pp_comm as a float under sequence parallel


def _hint(token: str, allowed) -> str:
    close = difflib.get_close_matches(token, list(allowed), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


class SimAIComm(Enum):
    """A communication type as the file spells it.

    The suffix names the group: `_EP` the expert-parallel group, `_DP_EP` the data-parallel
    group among expert replicas; without one the column decides (fwd and ig: tp, wg: dp).
    SimAI parses BROADCAST (AICB's old files) as no communication at all; it is kept here so
    the file round-trips and the neutral view does not hide a collective AICB meant.
    """

    NONE = "NONE"
    ALLREDUCE = "ALLREDUCE"
    ALLREDUCE_EP = "ALLREDUCE_EP"
    ALLREDUCE_DP_EP = "ALLREDUCE_DP_EP"
    ALLGATHER = "ALLGATHER"
    ALLGATHER_EP = "ALLGATHER_EP"
    ALLGATHER_DP_EP = "ALLGATHER_DP_EP"
    REDUCESCATTER = "REDUCESCATTER"
    REDUCESCATTER_EP = "REDUCESCATTER_EP"
    REDUCESCATTER_DP_EP = "REDUCESCATTER_DP_EP"
    ALLTOALL = "ALLTOALL"
    ALLTOALL_EP = "ALLTOALL_EP"
    ALLTOALL_DP_EP = "ALLTOALL_DP_EP"
    BROADCAST = "BROADCAST"

    @property
    def collective(self) -> str | None:
        """The collective in our vocabulary (`COLLECTIVES`), None for NONE."""
        for prefix, op in _OPS.items():
            if self.value.startswith(prefix):
                return op
        return None

    def group(self, column: str) -> str | None:
        """The group kind (`GROUP_KINDS`) this type uses in `column` (fwd, ig or wg)."""
        if self is SimAIComm.NONE:
            return None
        for suffix, group in _SUFFIX_GROUPS.items():
            if self.value.endswith(suffix):
                return group
        return _COLUMN_GROUPS[column]

    @classmethod
    def parse(cls, token: str, field_name: str) -> SimAIComm:
        try:
            return cls(token)
        except ValueError:
            allowed = [c.value for c in cls]
            raise WorkloadFormatError(
                f"{field_name}: comm type {token!r} unknown{_hint(token, allowed)}; allowed: {', '.join(allowed)}"
            ) from None

    @classmethod
    def spelling(cls, collective: str, group: str, column: str) -> SimAIComm:
        """The type that means `collective` over `group` in `column`, or why none does.

        A column can name only its implied group and the suffixed ones, so a dp collective
        cannot sit in fwd or ig, nor a tp one in wg. BROADCAST and send/recv are refused:
        SimAI would drop the first and has no row form for the second (PP goes in `pp_comm:`).
        """
        for comm in cls:
            if comm not in (cls.NONE, cls.BROADCAST) and comm.collective == collective and comm.group(column) == group:
                return comm
        ops = [op for op in COLLECTIVES if op not in _UNWRITABLE]
        if collective not in ops:
            why = _UNWRITABLE.get(collective, "unknown")
            raise WorkloadFormatError(
                f"collective {collective!r} cannot be written in a row ({why}); allowed: {', '.join(ops)}"
            )
        groups = [_COLUMN_GROUPS[column], *_SUFFIX_GROUPS.values()]
        raise WorkloadFormatError(
            f"group {group!r} cannot be written in the {column} column; allowed: {', '.join(groups)}"
        )


def _check_count(owner: str, name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise WorkloadFormatError(f"{owner}.{name}={value!r} must be an integer >= {minimum}")


@dataclass(frozen=True)
class SimAIHeader:
    """Line 1. A key the file leaves out is None (AICB's older files carry only tp).

    `tp` is `model_parallel_NPU_group`; `vpp` is what AICB writes there, layers per pipeline
    stage, not Megatron's virtual-pipeline size (SimAI divides the bubble by ga*vpp);
    `ga` is micro-batches per iteration; `pp_comm_bytes` one pipeline send. `checkpoints` and
    `checkpoint_initiates` are row indices (`checkpoints: 0` gives an empty tuple).
    `dlrm_last_bottom_layer` only matters to the HYBRID_DLRM policies.
    """

    policy: str
    tp: int | None = None
    ep: int | None = None
    pp: int | None = None
    vpp: int | None = None
    ga: int | None = None
    all_gpus: int | None = None
    checkpoints: tuple[int, ...] | None = None
    checkpoint_initiates: tuple[int, ...] | None = None
    pp_comm_bytes: int | None = None
    dlrm_last_bottom_layer: int | None = None

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise WorkloadFormatError(
                f"policy {self.policy!r} unknown{_hint(self.policy, POLICIES)}; allowed: {', '.join(POLICIES)}"
            )
        for name in ("tp", "ep", "pp", "vpp", "ga", "all_gpus", "pp_comm_bytes", "dlrm_last_bottom_layer"):
            value = getattr(self, name)
            if value is not None:
                _check_count("header", name, value, 0 if name in ("pp_comm_bytes", "dlrm_last_bottom_layer") else 1)
        for name in ("checkpoints", "checkpoint_initiates"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(value))
                for index in getattr(self, name):
                    _check_count("header", name, index, 0)


@dataclass(frozen=True)
class SimAILayer:
    """One row: compute (ns) and one optional collective (bytes per rank) for each of the
    forward (fwd), input-gradient (ig) and weight-gradient (wg) phases.

    `dependency` is read and ignored by SimAI (always -1). `update_ns` is a delay SimAI's
    event-driven backends add after each of this row's collectives; the analytical one
    ignores it (AICB writes 100, 1 in its micro-benchmarks).
    """

    name: str
    fwd_compute_ns: int = 0
    fwd_comm: SimAIComm = SimAIComm.NONE
    fwd_comm_bytes: int = 0
    ig_compute_ns: int = 0
    ig_comm: SimAIComm = SimAIComm.NONE
    ig_comm_bytes: int = 0
    wg_compute_ns: int = 0
    wg_comm: SimAIComm = SimAIComm.NONE
    wg_comm_bytes: int = 0
    update_ns: int = 100
    dependency: int = -1

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            raise WorkloadFormatError(f"layer name {self.name!r} must be one non-empty word (no whitespace)")
        owner = f"layer {self.name!r}"
        for column in COLUMNS:
            _check_count(owner, f"{column}_compute_ns", getattr(self, f"{column}_compute_ns"), 0)
            _check_count(owner, f"{column}_comm_bytes", getattr(self, f"{column}_comm_bytes"), 0)
            if not isinstance(getattr(self, f"{column}_comm"), SimAIComm):
                raise WorkloadFormatError(f"{owner}.{column}_comm must be a SimAIComm")
        _check_count(owner, "update_ns", self.update_ns, 0)
        if not isinstance(self.dependency, int) or isinstance(self.dependency, bool):
            raise WorkloadFormatError(f"{owner}.dependency={self.dependency!r} must be an integer")


@dataclass(frozen=True)
class SimAIWorkload:
    """A parsed file: the header and the rows (the row count is len(layers))."""

    header: SimAIHeader
    layers: tuple[SimAILayer, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        for name in ("checkpoints", "checkpoint_initiates"):
            for index in getattr(self.header, name) or ():
                if index >= len(self.layers):
                    raise WorkloadFormatError(f"header.{name}: row {index} is past the last row {len(self.layers) - 1}")


def _where(source: str, lineno: int, message: str) -> WorkloadFormatError:
    return WorkloadFormatError(f"{source} line {lineno}: {message}")


def _parse_header(line: str, source: str) -> SimAIHeader:
    tokens = line.split()
    if not tokens:
        raise _where(source, 1, f"expected a policy token ({', '.join(POLICIES)}), got an empty line")
    if tokens[0] == "HYBRID_CUSTOMIZED":
        raise _where(source, 1, "policy HYBRID_CUSTOMIZED (13-field rows) is not supported")
    if tokens[0] not in POLICIES:
        raise _where(
            source, 1, f"policy {tokens[0]!r} unknown{_hint(tokens[0], POLICIES)}; allowed: {', '.join(POLICIES)}"
        )
    values: dict[str, object] = {}
    i = 1
    while i < len(tokens):
        key = _KEY_ALIASES.get(tokens[i], tokens[i])
        if key not in HEADER_KEYS:
            raise _where(
                source,
                1,
                f"header key {tokens[i]!r} unknown{_hint(tokens[i], HEADER_KEYS)}; allowed: {', '.join(HEADER_KEYS)}",
            )
        attr = HEADER_KEYS[key]
        if attr in values:
            raise _where(source, 1, f"header key {key!r} appears twice")
        if key in _LIST_KEYS:  # a count, then that many row indices
            n = _header_int(tokens, i + 1, key, source)
            values[attr] = tuple(_header_int(tokens, i + 2 + k, key, source) for k in range(n))
            i += 2 + n
        else:
            values[attr] = _header_int(tokens, i + 1, key, source)
            i += 2
    try:
        return SimAIHeader(tokens[0], **values)
    except WorkloadFormatError as exc:
        raise _where(source, 1, str(exc)) from None


def _header_int(tokens: list[str], i: int, key: str, source: str) -> int:
    if i >= len(tokens):
        raise _where(source, 1, f"header key {key!r} needs a whole number after it, got the end of the line")
    match = _WHOLE.fullmatch(tokens[i])
    if not match:
        raise _where(source, 1, f"header key {key!r}: expected a whole number, got {tokens[i]!r}")
    return int(match.group(1))


def _parse_row(tokens: list[str]) -> SimAILayer:
    if len(tokens) != len(ROW_FIELDS):
        raise WorkloadFormatError(f"expected {len(ROW_FIELDS)} fields ({', '.join(ROW_FIELDS)}), got {len(tokens)}")
    values: dict[str, object] = {"name": tokens[0]}
    for name, token in zip(ROW_FIELDS[1:], tokens[1:]):
        if name.endswith("_comm"):
            values[name] = SimAIComm.parse(token, name)
        elif not (_INT if name == "dependency" else _UINT).fullmatch(token):
            kind = "an integer" if name == "dependency" else "a non-negative integer"
            raise WorkloadFormatError(f"{name}: expected {kind}, got {token!r}")
        else:
            values[name] = int(token)
    return SimAILayer(**values)


def parse_simai_workload(text: str, source: str = "<string>") -> SimAIWorkload:
    """Parse a workload file's text; errors name `source`, the line and what was expected.

    Blank lines after line 2 are skipped (SimAI reads tokens, not lines).
    """
    lines = text.splitlines()
    header = _parse_header(lines[0] if lines else "", source)
    count_line = lines[1].strip() if len(lines) > 1 else ""
    if not _UINT.fullmatch(count_line):
        raise _where(source, 2, f"expected the number of rows, got {count_line!r}")
    layers = []
    for lineno, line in enumerate(lines[2:], start=3):
        if line.strip():
            try:
                layers.append(_parse_row(line.split()))
            except WorkloadFormatError as exc:
                raise _where(source, lineno, str(exc)) from None
    if len(layers) != int(count_line):
        raise _where(source, 2, f"header says {int(count_line)} rows, file has {len(layers)}")
    try:
        return SimAIWorkload(header, tuple(layers))
    except WorkloadFormatError as exc:
        raise _where(source, 1, str(exc)) from None


def read_simai_workload(path: str | Path) -> SimAIWorkload:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_simai_workload(text, str(path))


def _format_header(header: SimAIHeader) -> str:
    parts = [header.policy]
    for key, attr in HEADER_KEYS.items():
        value = getattr(header, attr)
        if value is None:
            continue
        parts += [key, str(len(value)), *map(str, value)] if key in _LIST_KEYS else [key, str(value)]
    return " ".join(parts)


def _format_row(layer: SimAILayer) -> str:
    fields = [layer.name, str(layer.dependency)]
    for column in COLUMNS:
        comm = getattr(layer, f"{column}_comm")
        fields += [str(getattr(layer, f"{column}_compute_ns")), comm.value, str(getattr(layer, f"{column}_comm_bytes"))]
    fields.append(str(layer.update_ns))
    return "\t".join(fields)


def format_simai_workload(workload: SimAIWorkload) -> str:
    """The file text SimAI reads: header, row count, one tab-separated row per layer."""
    lines = [_format_header(workload.header), str(len(workload.layers)), *map(_format_row, workload.layers)]
    return "\n".join(lines) + "\n"


def write_simai_workload(workload: SimAIWorkload, path: str | Path) -> None:
    Path(path).write_text(format_simai_workload(workload), encoding="utf-8")
