"""A training candidate's step as Chakra execution traces, one per rank, for ASTRA-sim to replay.

Ranks follow Megatron's order, as everywhere in dse: tp innermost, then cp, dp, pp outermost
(rank = tp_i + tp*(cp_i + cp*(dp_i + dp*stage))); expert groups re-split a stage's ranks etp
innermost, then ep. A rank runs its stage's chunks in the order its pipeline schedule runs them
(`stage_order`): per micro-batch and chunk, forward layer by layer, backward in reverse, each
layer phase (fwd, bwd_input, bwd_weight) one COMP_NODE whose num_ops and tensor_size are the
FLOPs and bytes of the operation inventory (`step_operations`) and whose duration is the time
the analytical model gives it (`layer_blocks`, as the SimAI export), then the phase's
collectives (COMM_COLL_NODE; ZeRO-3's weight all-gather before the compute) and context
parallelism's ring steps (a send to the next cp rank, a receive from the previous). After the
last backward come the step's data-parallel collectives and the optimizer.

Dependencies chain each rank's nodes in issue order (the only dependencies Chakra's feeder
obeys are data_deps), except that nothing waits for a pipeline send, so sends overlap the next
compute and stages cannot deadlock on them, and a ring step's send and receive run side by
side. Collectives carry pg_name "<group>:<first rank>" (tp, cp, dp, dp_ep, ep, etp); no
involved_dim, which depends on the ASTRA-sim network the user picks.
Not exported: the overlap of gradient reduction with the backward pass, recomputation's rerun
forward, offloading, and ZB-H1's deferred weight gradients (listed in 1F1B order).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from simulators.analytical._layer import adam_step_s, layer_blocks, output_layer, per_layer_plan
from simulators.analytical._timeline import stage_order
from simulators.workload import (
    Collective,
    TrainingCandidate,
    layer_collectives,
    pipeline_send_bytes,
    stage_params,
    step_collectives,
    step_operations,
)
from simulators.workload._chakra import (
    COMM_COLL_NODE,
    COMM_RECV_NODE,
    COMM_SEND_NODE,
    COMM_TYPES,
    COMP_NODE,
    ChakraNode,
)
from simulators.workload._memory import virtual_stage_bounds

NS_PER_S = 1e9
_BEFORE_COMPUTE = ("weight all_gather",)  # ZeRO-3 gathers a layer's weights before using them


@dataclass(frozen=True)
class _Unit:
    """One layer phase of one micro-batch: compute, and the collectives around it."""

    name: str
    flops: float
    nbytes: float
    seconds: float
    collectives: tuple[Collective, ...]


def rank_coordinates(candidate: TrainingCandidate, rank: int) -> dict[str, int]:
    """tp, cp, dp and pp (stage) index of `rank` in Megatron's order."""
    plan = candidate.plan
    tp_i, rest = rank % plan.tp, rank // plan.tp
    cp_i, rest = rest % plan.cp, rest // plan.cp
    return {"tp": tp_i, "cp": cp_i, "dp": rest % plan.dp, "pp": rest // plan.dp}


@dataclass(frozen=True)
class _StageWork:
    """What every rank of one stage runs: per chunk the forward and backward units of one
    micro-batch, the step's data-parallel collectives and the optimizer."""

    forward: list[list[_Unit]]
    backward: list[list[_Unit]]
    step_collectives: tuple[Collective, ...]
    optimizer: _Unit


def _stage_work(candidate: TrainingCandidate, stage: int) -> _StageWork:
    model, plan, system = candidate.model, candidate.plan, candidate.system
    work: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for op in step_operations(candidate, stage):
        if op.kind != "collective":
            work[op.scope, op.phase][0] += op.flops
            work[op.scope, op.phase][1] += op.nbytes
    gpu, layer_plan, speed = system.gpu, per_layer_plan(plan), (system.calibration, system.compute_fraction)

    def units(scope: str, blocks, collectives: list[Collective]) -> dict[str, _Unit]:
        seconds = {"fwd": "forward_s", "bwd_input": "input_grad_s", "bwd_weight": "weight_grad_s"}
        return {
            phase: _Unit(
                f"{scope}.{phase}",
                *work[scope, phase],
                sum(getattr(b, attr) for b in blocks),
                tuple(c for c in collectives if c.phase == phase),
            )
            for phase, attr in seconds.items()
        }

    bounds = virtual_stage_bounds(model, plan)
    forward, backward = [], []
    for chunk in range(plan.vpp):
        g = chunk * plan.pp + stage
        layers = [
            units(f"layer {i}", layer_blocks(model, gpu, layer_plan, i, *speed), layer_collectives(model, plan, i))
            for i in range(bounds[g], bounds[g + 1])
        ]
        if g == plan.pp * plan.vpp - 1:  # the last virtual stage holds the output layer
            layers.append(units("output", [output_layer(model, gpu, layer_plan, *speed)], []))
        forward.append([layer["fwd"] for layer in layers])
        backward.append([layer[p] for layer in reversed(layers) for p in ("bwd_input", "bwd_weight")])
    steps = tuple(c for c in step_collectives(model, plan, stage) if c.per == "step")
    dense, expert = stage_params(model, plan, stage)
    optimizer = _Unit("optimizer", 0.0, work["step", "optimizer"][1], adam_step_s(gpu, plan, dense, expert), ())
    return _StageWork(forward, backward, steps, optimizer)


class _Trace:
    """Nodes of one rank in issue order; `head` holds the ids the next chained node waits for."""

    def __init__(self, candidate: TrainingCandidate, rank: int):
        self.candidate, self.rank = candidate, rank
        self.nodes: list[ChakraNode] = []
        self.head: tuple[int, ...] = ()
        self.ring_steps = 0

    def add(self, name: str, kind: int, *, duration_s: float = 0.0, attrs=(), chained: bool = True) -> int:
        node_id = len(self.nodes)
        duration_ns = round(duration_s * NS_PER_S)
        attrs = (("is_cpu_op", False), *attrs)
        self.nodes.append(ChakraNode(node_id, name, kind, self.head, duration_ns, attrs))
        if chained:
            self.head = (node_id,)
        return node_id

    def compute(self, name: str, unit: _Unit) -> int:
        attrs = (("num_ops", round(unit.flops)), ("tensor_size", round(unit.nbytes)))
        return self.add(name, COMP_NODE, duration_s=unit.seconds, attrs=attrs)

    def collective(self, name: str, c: Collective) -> None:
        if c.op == "send_recv":  # a context-parallel ring step: pass to the next rank, take from the previous
            self.ring_step(name, c)
            return
        span = c.ranks * c.stride
        first = self.rank % c.stride + self.rank // span * span
        attrs = (("comm_type", COMM_TYPES[c.op]), ("comm_size", int(c.nbytes)), ("pg_name", f"{c.group}:{first}"))
        self.add(f"{name}.{c.group} {c.name}", COMM_COLL_NODE, attrs=attrs)

    def ring_step(self, name: str, c: Collective) -> None:
        plan = self.candidate.plan
        cp_i = rank_coordinates(self.candidate, self.rank)["cp"]
        base = self.rank - cp_i * plan.tp
        tag = 2 * plan.microbatches * plan.pp * plan.vpp + self.ring_steps
        self.ring_steps += 1
        start = self.head
        send = self.p2p(f"{name}.cp send", COMM_SEND_NODE, base + (cp_i + 1) % plan.cp * plan.tp, tag, int(c.nbytes))
        self.head = start
        recv = self.p2p(f"{name}.cp recv", COMM_RECV_NODE, base + (cp_i - 1) % plan.cp * plan.tp, tag, int(c.nbytes))
        self.head = (send, recv)

    def p2p(self, name: str, kind: int, peer: int, tag: int, nbytes: int, *, chained: bool = True) -> int:
        src, dst = (self.rank, peer) if kind == COMM_SEND_NODE else (peer, self.rank)
        attrs = (("comm_src", src), ("comm_dst", dst), ("comm_tag", tag), ("comm_size", nbytes))
        return self.add(name, kind, attrs=attrs, chained=chained)

    def unit(self, prefix: str, unit: _Unit) -> None:
        name = f"{prefix}.{unit.name}"
        for c in unit.collectives:
            if c.name in _BEFORE_COMPUTE:
                self.collective(name, c)
        self.compute(name, unit)
        for c in unit.collectives:
            if c.name not in _BEFORE_COMPUTE:
                self.collective(name, c)


def chakra_traces_of(candidate: TrainingCandidate):
    """(rank, its nodes for one training step in issue order) for every rank, in rank order."""
    plan = candidate.plan
    stage_ranks = plan.tp * plan.cp * plan.dp
    for stage in range(plan.pp):
        work = _stage_work(candidate, stage)
        for rank in range(stage * stage_ranks, (stage + 1) * stage_ranks):
            yield rank, _rank_nodes(candidate, rank, stage, work)


def _rank_nodes(candidate: TrainingCandidate, rank: int, stage: int, work: _StageWork) -> list[ChakraNode]:
    model, plan = candidate.model, candidate.plan
    trace = _Trace(candidate, rank)
    stages, stage_ranks = plan.pp * plan.vpp, plan.tp * plan.cp * plan.dp
    send_bytes = pipeline_send_bytes(model, plan) if plan.pp > 1 else 0

    def peer(g: int) -> int:  # the rank of this rank's tp/cp/dp slot on virtual stage g
        return rank + (g % plan.pp - stage) * stage_ranks

    for kind, mb, chunk in stage_order(stage, plan.pp, plan.vpp, plan.microbatches, plan.pipeline_schedule):
        g = chunk * plan.pp + stage
        step, direction = (1, 0) if kind == "F" else (-1, 1)
        source, target = g - step, g + step  # the virtual stage feeding this one and the one it feeds
        prefix = f"mb{mb}.chunk{chunk}.{kind}"
        if 0 <= source < stages:  # a tag names the sender's virtual stage, the micro-batch and the direction
            tag = (mb * stages + source) * 2 + direction
            trace.p2p(f"{prefix}.recv", COMM_RECV_NODE, peer(source), tag, send_bytes)
        for unit in work.forward[chunk] if kind == "F" else work.backward[chunk]:
            trace.unit(prefix, unit)
        if 0 <= target < stages:
            tag = (mb * stages + g) * 2 + direction
            trace.p2p(f"{prefix}.send", COMM_SEND_NODE, peer(target), tag, send_bytes, chained=False)

    for c in work.step_collectives:
        if c.phase == "bwd_weight":
            trace.collective("step", c)
    trace.compute("step.optimizer", work.optimizer)
    for c in work.step_collectives:
        if c.phase == "optimizer":
            trace.collective("step", c)
    return trace.nodes
