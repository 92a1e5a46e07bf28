"""Checks of a training study's knobs before any trial: each applies the simulator's own rule
(simulators.workload) to every value of a knob, so an impossible value is reported once, with
its field path, instead of failing every trial."""

from __future__ import annotations

import itertools

from dse.errors import SpecError
from dse.evaluation.space import host_tier_of
from dse.spec.fields import TokenBounds, knob_values
from dse.spec.study import Study
from simulators.hardware import GpuSpec, gpus_with_host_tier
from simulators.models import ModelSpec
from simulators.workload import RECOMPUTE_MODULES, ep_problem, etp_problem, pp_problem, precision_problem, tp_problem


def _check_pipeline_split(settings, search, model: ModelSpec, pps: list[int]) -> None:
    """Every pp must split the layers some way the search offers; every vpp must fit some pp; a
    layout must fit the model and a shape of the search."""
    splits, vpps = search.pipeline_split, knob_values(search.vpp)
    explicit = (settings.first_stage_layers, settings.last_stage_layers)
    if settings.pipeline_layout is not None:  # one layout fits one pipeline shape: all must take it
        layout = tuple(settings.pipeline_layout)
        for pp, vpp, split in itertools.product(pps, vpps, splits):
            if problem := pp_problem(model, pp, vpp, split, *explicit, layout):
                raise SpecError(f"training.pipeline_layout: {problem} (search.pp={pp}, search.vpp={vpp})")
        return
    layouts = _check_layouts(settings, search, model, pps, vpps)
    for pp in pps:
        problems = [pp_problem(model, pp, 1, split, *explicit) for split in splits]
        if pp > 1 and all(problems) and not any(shape[0] == pp for shape in layouts):
            raise SpecError(f"search.pp: {problems[0]}")
        if pp == 1 and (1, 1) not in layouts and (problem := pp_problem(model, 1)):
            raise SpecError(f"search.pp: {problem}")
    for vpp in vpps:
        plans = [(pp, split) for pp in pps if pp > 1 for split in splits]
        fits = any((pp, vpp) in layouts for pp in pps if pp > 1)
        if vpp > 1 and not fits and not any(not pp_problem(model, pp, vpp, split, *explicit) for pp, split in plans):
            why = f": {pp_problem(model, plans[0][0], vpp, plans[0][1], *explicit)}" if plans else " (vpp needs pp > 1)"
            raise SpecError(f"search.vpp: {vpp} chunks per stage fit no pp and pipeline_split of the search space{why}")


def _check_layouts(settings, search, model: ModelSpec, pps: list[int], vpps: tuple[int, ...]) -> set[tuple[int, int]]:
    """The shapes `training.pipeline_layouts` gives a layout, each checked against the model and
    the search: a layout of a shape no plan has would silently go unused."""
    for i, layout in enumerate(settings.pipeline_layouts):
        field = f"training.pipeline_layouts[{i}]"
        if layout.pp not in pps or layout.vpp not in vpps:
            raise SpecError(
                f"{field}: pp={layout.pp}, vpp={layout.vpp} is no pipeline shape of the search; allowed: pp in "
                f"search.pp ({', '.join(map(str, pps))}), vpp in search.vpp ({', '.join(map(str, vpps))})"
            )
        if layout.vpp > 1 and layout.pp == 1:
            raise SpecError(f"{field}: vpp={layout.vpp} needs pp > 1 (interleaved 1F1B); allowed: vpp 1 with pp 1")
        if problem := pp_problem(model, layout.pp, layout.vpp, layout=tuple(layout.layers)):
            raise SpecError(f"{field}: {problem}")
    if settings.pipeline_layouts and "even" not in search.pipeline_split:
        raise SpecError(
            "search.pipeline_split: a plan with a layout of training.pipeline_layouts splits by it alone "
            "(Megatron refuses both); allowed: a list holding even"
        )
    return {layout.shape for layout in settings.pipeline_layouts}


def check_training(study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
    settings, search = study.training, study.search
    for gpu in gpus:
        if problem := precision_problem(gpu, settings.precision):
            raise SpecError(f"training.precision: {settings.precision!r}: {problem}")
    if model.max_seq_len is not None and settings.seq_len > model.max_seq_len:
        raise SpecError(f"training.seq_len: {settings.seq_len} exceeds max_seq_len={model.max_seq_len} of {model.name}")
    if "mla_up_proj" in settings.recompute_modules and not model.is_mla:
        raise SpecError(
            f"training.recompute_modules: mla_up_proj needs multi-latent attention; {model.name} has none "
            f"(allowed: {', '.join(m for m in RECOMPUTE_MODULES if m != 'mla_up_proj')})"
        )
    offloads = [mode for mode in search.offload if mode != "none"]
    tiers = [host_tier_of(study.hardware.host_tier, gpu) for gpu in gpus]  # an unknown name raises here
    if offloads and not any(tiers):
        raise SpecError(
            f"search.offload: {offloads[0]!r} needs a host memory tier, and no GPU of hardware.gpu "
            f"({', '.join(g.name for g in gpus)}) has one in simulators/hardware/memory_tiers.yaml "
            f"(GPUs with one: {', '.join(gpus_with_host_tier())}); set hardware.host_tier, or allowed here: none"
        )
    tps, pps, cps = knob_values(search.tp), knob_values(search.pp), knob_values(search.cp)
    for field, values, rule in (
        ("search.tp", tps, tp_problem),
        ("search.ep", knob_values(search.ep), ep_problem),
        ("search.etp", knob_values(search.etp), etp_problem),
    ):
        for value in values:
            if problem := rule(model, value):
                raise SpecError(f"{field}: {problem}")
    _check_pipeline_split(settings, search, model, pps)
    for cp in cps:
        if cp > 1 and settings.seq_len % (2 * cp):
            raise SpecError(f"search.cp: {cp} does not split seq_len={settings.seq_len} into 2*cp equal chunks")
    counts = knob_values(study.hardware.num_gpus)
    per_server = study.hardware.fabric.gpus_per_server
    for n in counts:
        if n > per_server and n % per_server:
            raise SpecError(
                f"hardware.num_gpus: {n} fills no whole number of servers of hardware.fabric.gpus_per_server="
                f"{per_server}; allowed: 1 to {per_server}, or a multiple of {per_server}"
            )
    splits = {tp * pp * cp for tp, pp, cp in itertools.product(tps, pps, cps)}
    for n in counts:
        if not any(n % split == 0 for split in splits):
            raise SpecError(
                f"hardware.num_gpus: {n} is not a multiple of any tp*pp*cp of the search space "
                f"({', '.join(map(str, sorted(splits)))})"
            )
    degrees = {"search.tp": tps, "search.pp": pps, "search.cp": cps}
    for field, values in degrees.items():
        others = [v for f, v in degrees.items() if f != field]
        for value in values:
            if not any(n % (value * a * b) == 0 for n in counts for a, b in itertools.product(*others)):
                raise SpecError(
                    f"{field}: {value} leaves no whole data-parallel degree for any of hardware.num_gpus={list(counts)}"
                )
    if settings.global_batch_tokens is not None:
        _check_batch_tokens(settings.global_batch_tokens, settings.seq_len, knob_values(search.global_batch))
    micro = knob_values(search.micro_batch)
    dps = {n // s for n in counts for s in splits if n % s == 0}
    for gb in knob_values(search.global_batch):
        if not any(gb % (dp * mb) == 0 for dp in dps for mb in micro):
            raise SpecError(
                f"search.global_batch: {gb} is not a multiple of dp*micro_batch for any plan of "
                f"the search space (dp: {', '.join(map(str, sorted(dps)))}; "
                f"micro_batch: {', '.join(map(str, micro))})"
            )


def _check_batch_tokens(bounds: TokenBounds, seq_len: int, batches: tuple[int, ...]) -> None:
    """Every global batch of the search holds the tokens per step the recipe allows."""
    low, high = bounds.sequences(seq_len)
    if high is not None and high < low:
        raise SpecError(
            f"training.global_batch_tokens: no whole number of sequences of seq_len={seq_len} holds "
            f"{bounds.min:g} to {bounds.max:g} tokens; allowed: bounds at least seq_len apart"
        )
    allowed = f"{low} to {high}" if high is not None else f"{low} or more"
    for gb in batches:
        tokens = gb * seq_len
        side = "below min" if bounds.min is not None and tokens < bounds.min else None
        side = "above max" if bounds.max is not None and tokens > bounds.max else side
        if side:
            bound = bounds.min if side == "below min" else bounds.max
            raise SpecError(
                f"search.global_batch: {gb} x seq_len {seq_len} = {tokens:g} tokens is {side} "
                f"training.global_batch_tokens={bound:g}; allowed: {allowed} sequences"
            )
