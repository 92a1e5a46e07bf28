"""SimAI workloads in plain terms: per-layer operations, SimAI-Analytical's iteration time, and
the exporter that turns our own per-layer data into a file SimAI accepts.

Vocabulary: phases `fwd`, `bwd_input`, `bwd_weight` (the file's fwd, ig and wg columns);
collectives and group kinds as in `_simai.COLLECTIVES` and `_simai.GROUP_KINDS`. `dp_ep` (the
data-parallel group among expert replicas, dp/ep ranks) stays apart from `dp` because its size
differs. The format has no optimizer-update phase: AICB writes the optimizer as ordinary rows,
and the 12th field is a post-collective delay, so no `update` operation is made from it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from simulators._errors import WorkloadFormatError
from simulators.workload._simai import COLUMNS, GROUP_KINDS, SimAIComm, SimAIHeader, SimAILayer, SimAIWorkload

PHASES = {"fwd": "fwd", "ig": "bwd_input", "wg": "bwd_weight"}
NS_PER_S = 1e9
# What SimAI-Analytical's bubble leaves out, by row name (Layer.cc: `id != "embedding_layer"`).
BUBBLE_EXCLUDED_ROW = "embedding_layer"

CollectiveTime = Callable[[str, str, int], float]  # (collective, group kind, bytes) -> seconds


@dataclass(frozen=True)
class SimAIOp:
    """One phase of one row: compute, then at most one collective over a group.

    `collective` and `group` are None when the phase communicates nothing; a zero-byte
    collective (AICB writes many) counts as nothing, as NCCL returns at once for count 0.
    """

    layer_index: int
    layer_name: str
    phase: str
    compute_s: float
    collective: str | None
    group: str | None
    nbytes: int


def _phase_op(index: int, layer: SimAILayer, column: str) -> SimAIOp:
    comm: SimAIComm = getattr(layer, f"{column}_comm")
    nbytes = getattr(layer, f"{column}_comm_bytes")
    talks = comm.collective is not None and nbytes > 0
    return SimAIOp(
        layer_index=index,
        layer_name=layer.name,
        phase=PHASES[column],
        compute_s=getattr(layer, f"{column}_compute_ns") / NS_PER_S,
        collective=comm.collective if talks else None,
        group=comm.group(column) if talks else None,
        nbytes=nbytes if talks else 0,
    )


def simai_operations(workload: SimAIWorkload) -> list[SimAIOp]:
    """Every phase that computes or communicates, in row order (fwd, bwd_input, bwd_weight).

    SimAI runs all forward phases in row order, then walks the rows backwards doing the input
    gradient, then the weight gradient, of each. Pipeline sends are not rows: see
    `header.pp_comm_bytes` and `simai_time_breakdown`.
    """
    ops = []
    for index, layer in enumerate(workload.layers):
        for column in COLUMNS:
            op = _phase_op(index, layer, column)
            if op.compute_s > 0 or op.collective is not None:
                ops.append(op)
    return ops


def simai_group_sizes(header: SimAIHeader, all_gpus: int | None = None) -> dict[str, int]:
    """Ranks per group kind as SimAI derives them: dp = all_gpus/(tp*pp), dp_ep = dp/ep.

    An older AICB file's header names only the policy and the TP size (FORMAT.md): it has no
    expert or pipeline parallelism (ep = pp = 1), and the job's GPU count comes from outside the
    file, as SimAI takes it from its `-g` flag: `all_gpus`, which must agree with a header that
    does state it."""
    if header.tp is None:
        raise WorkloadFormatError("header lacks model_parallel_NPU_group (the TP size); group sizes need it")
    if all_gpus is not None and header.all_gpus is not None and all_gpus != header.all_gpus:
        raise WorkloadFormatError(f"all_gpus={all_gpus} differs from the header's all_gpus={header.all_gpus}")
    gpus = header.all_gpus if header.all_gpus is not None else all_gpus
    if gpus is None:
        raise WorkloadFormatError(
            "header lacks all_gpus (an older AICB file): the job's GPU count must be given (dse workload import "
            "--num-gpus N, as SimAI's -g)"
        )
    header = dataclasses.replace(header, ep=header.ep or 1, pp=header.pp or 1, all_gpus=gpus)
    if header.all_gpus % (header.tp * header.pp):
        raise WorkloadFormatError(
            f"header: all_gpus={header.all_gpus} is not a multiple of tp*pp={header.tp * header.pp}"
        )
    dp = header.all_gpus // (header.tp * header.pp)
    if dp % header.ep:
        raise WorkloadFormatError(f"header: ep={header.ep} does not divide dp={dp} (all_gpus/(tp*pp))")
    return {"tp": header.tp, "ep": header.ep, "pp": header.pp, "dp": dp, "dp_ep": dp // header.ep}


@dataclass(frozen=True)
class SimAITimeBreakdown:
    """One iteration of one rank in seconds, split as SimAI-Analytical's EndToEnd.csv summary."""

    compute_s: float
    exposed_tp_s: float
    exposed_dp_s: float
    exposed_dp_ep_s: float
    exposed_ep_s: float
    exposed_pp_s: float
    bubble_s: float

    @property
    def exposed_comm_s(self) -> float:
        """Exposed collectives of the rows (SimAI's `total exposed comm`; PP is apart)."""
        return self.exposed_tp_s + self.exposed_dp_s + self.exposed_dp_ep_s + self.exposed_ep_s

    @property
    def total_s(self) -> float:
        return self.compute_s + self.exposed_comm_s + self.exposed_pp_s + self.bubble_s


def _overlaps(overlap: Mapping[str, float] | None) -> dict[str, float]:
    given = dict(overlap or {})
    unknown = sorted(set(given) - set(GROUP_KINDS))
    if unknown:
        raise WorkloadFormatError(f"overlap: group {unknown[0]!r} unknown; allowed: {', '.join(GROUP_KINDS)}")
    for group, ratio in given.items():
        if not 0.0 <= ratio <= 1.0:
            raise WorkloadFormatError(f"overlap[{group!r}]={ratio!r} must lie in [0, 1]")
    given.setdefault("dp_ep", given.get("dp", 0.0))  # SimAI applies the dp ratio to dp_ep
    return {group: given.get(group, 0.0) for group in GROUP_KINDS}


def simai_time_breakdown(
    workload: SimAIWorkload,
    collective_time_s: CollectiveTime,
    *,
    overlap: Mapping[str, float] | None = None,
    virtual_stages: int = 1,
) -> SimAITimeBreakdown:
    """One iteration as SimAI-Analytical adds it up (Layer::report, analytical mode).

    Sum of every row's compute, plus each collective's time times (1 - overlap[group]), plus
    the bubble (pp-1)/(ga*virtual_stages) times the sum over rows not named embedding_layer of
    compute and full fwd and ig communication, plus 2*ga*virtual_stages pipeline sends of
    `pp_comm_bytes` times (1 - overlap["pp"]). `collective_time_s(collective, group, nbytes)`
    gives seconds; overlap ratios default to 0, as SimAI's do except PP's, which SimAI sets to
    1 (PP hidden): pass {"pp": 1.0} to match it.

    Where this departs from SimAI: `virtual_stages` replaces the header's vpp, which AICB fills
    with layers per stage (pass header.vpp to reproduce SimAI); the PP term is not divided by
    the overlap ratio; BROADCAST rows are charged; fwd sizes under 4 KiB are not rounded up to
    4 KiB; each collective is filed under its own group (SimAI files a row's fwd and ig time
    under EP or TP by the fwd column's group alone). Row-level overlap is not modelled: the
    file does not say what hides what.
    """
    ratios = _overlaps(overlap)
    if not isinstance(virtual_stages, int) or isinstance(virtual_stages, bool) or virtual_stages < 1:
        raise WorkloadFormatError(f"virtual_stages={virtual_stages!r} must be an integer >= 1")
    compute_s = 0.0
    exposed = dict.fromkeys(GROUP_KINDS, 0.0)
    bubble_work_s = 0.0
    for op in simai_operations(workload):
        compute_s += op.compute_s
        comm_s = 0.0
        if op.collective is not None:
            comm_s = collective_time_s(op.collective, op.group, op.nbytes)
            exposed[op.group] += comm_s * (1.0 - ratios[op.group])
        if op.layer_name != BUBBLE_EXCLUDED_ROW:
            bubble_work_s += op.compute_s + (comm_s if op.phase != "bwd_weight" else 0.0)
    header = workload.header
    pp = header.pp or 1
    bubble_s = pp_s = 0.0
    if pp > 1:
        if header.ga is None:
            raise WorkloadFormatError(f"header: pp={pp} but no ga; the bubble needs micro-batches per iteration")
        bubble_s = bubble_work_s * (pp - 1) / (header.ga * virtual_stages)
        if header.pp_comm_bytes:
            sends = 2 * header.ga * virtual_stages
            pp_s = sends * collective_time_s("send_recv", "pp", header.pp_comm_bytes) * (1.0 - ratios["pp"])
    return SimAITimeBreakdown(
        compute_s=compute_s,
        exposed_tp_s=exposed["tp"],
        exposed_dp_s=exposed["dp"],
        exposed_dp_ep_s=exposed["dp_ep"],
        exposed_ep_s=exposed["ep"],
        exposed_pp_s=pp_s,
        bubble_s=bubble_s,
    )


def simai_workload_time_s(
    workload: SimAIWorkload,
    collective_time_s: CollectiveTime,
    *,
    overlap: Mapping[str, float] | None = None,
    virtual_stages: int = 1,
) -> float:
    """Seconds per iteration: `simai_time_breakdown(...).total_s`."""
    return simai_time_breakdown(workload, collective_time_s, overlap=overlap, virtual_stages=virtual_stages).total_s


_LAYER_KEYS = (
    "name",
    "fwd_compute_s",
    "fwd_comm",
    "ig_compute_s",
    "ig_comm",
    "wg_compute_s",
    "wg_comm",
    "update_ns",
)


def _export_row(index: int, layer: Mapping[str, object]) -> SimAILayer:
    where = f"layers[{index}] ({layer.get('name')!r})"
    unknown = sorted(set(layer) - set(_LAYER_KEYS))
    if unknown or "name" not in layer:
        what = f"key {unknown[0]!r} unknown" if unknown else "needs 'name'"
        raise WorkloadFormatError(f"{where}: {what}; allowed: {', '.join(_LAYER_KEYS)}")
    values: dict[str, object] = {"name": layer["name"], "update_ns": layer.get("update_ns", 100)}
    for column in COLUMNS:
        seconds = layer.get(f"{column}_compute_s", 0.0)
        if not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0:
            raise WorkloadFormatError(f"{where}.{column}_compute_s={seconds!r} must be finite seconds >= 0")
        values[f"{column}_compute_ns"] = round(seconds * NS_PER_S)
        comm = layer.get(f"{column}_comm")
        if comm is None:
            continue
        if not isinstance(comm, tuple | list) or len(comm) != 3:
            raise WorkloadFormatError(f"{where}.{column}_comm={comm!r} must be None or (collective, group kind, bytes)")
        try:
            values[f"{column}_comm"] = SimAIComm.spelling(comm[0], comm[1], column)
        except WorkloadFormatError as exc:
            raise WorkloadFormatError(f"{where}.{column}_comm: {exc}") from None
        values[f"{column}_comm_bytes"] = comm[2]
    try:
        return SimAILayer(**values)
    except WorkloadFormatError as exc:
        raise WorkloadFormatError(f"{where}: {exc}") from None


def simai_workload_from_layers(
    *,
    tp: int,
    ep: int,
    pp: int,
    vpp: int,
    ga: int,
    all_gpus: int,
    pp_comm_bytes: int,
    layers: Sequence[Mapping[str, object]],
) -> SimAIWorkload:
    """A HYBRID_TRANSFORMER_FWD_IN_BCKWD workload, as AICB writes one, from plain data.

    Header (all required, so SimAI prints no format-mismatch warning): tp, ep, pp and
    all_gpus in ranks (tp*pp must divide all_gpus, ep the resulting dp); `vpp` is the
    divisor SimAI puts under the bubble with ga (AICB writes layers per stage; 1 gives
    the plain 1F1B bubble); `ga` micro-batches per iteration, unrolled by the caller into
    `layers`; `pp_comm_bytes` one pipeline send, > 0 exactly when pp > 1.
    Each layer is a mapping: `name` (required, one word); `fwd_compute_s`, `ig_compute_s`,
    `wg_compute_s` (seconds, rounded to ns; default 0); `fwd_comm`, `ig_comm`, `wg_comm`
    (None, the default, or (collective, group kind, bytes per rank)); `update_ns` (default
    100, as AICB). fwd and ig collectives run over tp, ep or dp_ep; wg ones over dp, ep or dp_ep.
    """
    header = SimAIHeader(
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
        tp=tp,
        ep=ep,
        pp=pp,
        vpp=vpp,
        ga=ga,
        all_gpus=all_gpus,
        checkpoints=(),
        checkpoint_initiates=(),
        pp_comm_bytes=pp_comm_bytes,
    )
    simai_group_sizes(header)
    if (pp > 1) != (pp_comm_bytes > 0):
        raise WorkloadFormatError(f"pp_comm_bytes={pp_comm_bytes} with pp={pp}: it must be > 0 exactly when pp > 1")
    return SimAIWorkload(header, tuple(_export_row(i, layer) for i, layer in enumerate(layers)))
