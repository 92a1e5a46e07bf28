"""Checks of a study against the catalogues, run before any trial (issue: fail fast).

Each check applies the simulator's own rule (simulators.workload) to every value of a knob,
so an impossible value is reported once, with its field path, instead of failing every trial.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

from dse.catalogs import gpu_catalogue, study_model, study_price_book
from dse.cost import PriceBook, price_book
from dse.errors import CatalogError, DseError, SpecError
from dse.inputs import CALIBRATION_LIMIT, TRACE_LIMIT, read_text, regular_file
from dse.metrics import CAPACITY_METRICS, OWNED_METRICS, metrics_for
from dse.spec import Constraint, Study, TokenBounds, knob_values
from simulators._registry import Registry
from simulators.hardware import GpuSpec, parse_calibration, sustained_compute_fraction
from simulators.models import ModelSpec
from simulators.network import Fabric
from simulators.serving import load_trace, load_vidur_profile
from simulators.workload import (
    RECOMPUTE_MODULES,
    ep_problem,
    etp_problem,
    pp_problem,
    precision_problem,
    tp_problem,
)


@dataclass(frozen=True)
class ResolvedStudy:
    """A study whose names all resolved to catalogue entries; the search starts from this."""

    study: Study
    model: ModelSpec
    gpus: tuple[GpuSpec, ...]
    usd_per_gpu_hour: dict[str, float]  # in the spec's cloud tier
    prices: PriceBook  # the price book with the spec's overrides
    nic_gbps: tuple[float, ...]  # values of the nic_gbps knob
    objectives: tuple[str, ...]  # canonical metric names
    directions: tuple[str, ...]  # "minimize" / "maximize", one per objective
    constraints: tuple[Constraint, ...]  # with canonical metric names
    compute_fraction: float  # share of modelled kernel speed assumed sustained
    nic_efficiency: float | None = None  # measured by `dse validate --calibrate`; None: the fabric's own

    def fabric(self, family: str, nic_gbps: float) -> Fabric:
        """The cluster fabric of one family and NIC speed, with the spec's other fabric settings."""
        settings = self.study.hardware.fabric
        return Fabric(
            family=family,
            nic_gbps=nic_gbps,
            gpus_per_server=settings.gpus_per_server,
            nics_per_server=settings.nics_per_server,
            switch_radix=settings.switch_radix,
            oversubscription=settings.oversubscription,
        )


def resolve_study(study: Study) -> ResolvedStudy:
    """Resolve every name in `study` and prove each knob value can be part of a valid plan.
    The study's own catalogue files are read here, once; the result carries their entries."""
    model = study_model(study.model)
    catalogue = gpu_catalogue(study.hardware.gpu_catalog)
    gpus = tuple(catalogue.lookup(name, f"hardware.gpu[{i}]") for i, name in enumerate(study.hardware.gpu))
    book = price_book(study.cost.overrides(), study_price_book(study.cost.price_book))
    rental = _rental_prices(study, gpus, book, catalogue)
    if study.mode == "training":
        _check_training(study, model, gpus)
    else:
        _check_serving(study, model, gpus)
        if study.fidelity.packet is not None:
            raise SpecError("fidelity.packet: re-evaluates training collectives; not allowed with mode inference")
    if study.hardware.calibration:
        _check_calibration(study.hardware.calibration)
    nic_efficiency = None
    if path := study.hardware.network_calibration:  # read once here, so a bad file stops the study now
        from dse.network_calibration import load_calibration

        nic_efficiency = load_calibration(path)
    objectives, directions = _check_metrics(study)
    constraints = tuple(
        c.model_copy(update={"metric": _metric(c.metric, f"constraints[{i}].metric", study).name})
        for i, c in enumerate(study.constraints)
    )
    fabric = study.hardware.fabric
    speeds = fabric.nic_gbps or sorted({gpu.nic_gbps for gpu in gpus})
    nic_gbps = tuple(int(v) if float(v).is_integer() else float(v) for v in speeds)
    _check_ownership(study, gpus, book, nic_gbps, (*objectives, *(c.metric for c in constraints)))
    # Measured kernel times already include what the fitted fraction stands for.
    fraction = study.hardware.compute_fraction
    if fraction is None:
        fraction = 1.0 if study.hardware.calibration else sustained_compute_fraction()
    return ResolvedStudy(
        study, model, gpus, rental, book, nic_gbps, objectives, directions, constraints, fraction, nic_efficiency
    )


def _rental_prices(
    study: Study, gpus: tuple[GpuSpec, ...], book: PriceBook, catalogue: Registry[GpuSpec]
) -> dict[str, float]:
    """$/GPU-hour of every GPU of the study in its cloud tier: the spec's, else the book's."""
    tier = study.cost.cloud_tier
    if tier not in book.tiers:
        raise SpecError(f"cost.cloud_tier: {tier!r} is not allowed; allowed: {', '.join(book.tiers)}")
    names = [gpu.name for gpu in gpus]
    given = {}
    for name, price in study.cost.usd_per_gpu_hour.items():
        gpu = catalogue.lookup(name, f"cost.usd_per_gpu_hour.{name}")
        if gpu.name not in names:
            raise SpecError(
                f"cost.usd_per_gpu_hour.{name}: {gpu.name} is not in hardware.gpu; allowed: {', '.join(names)}"
            )
        given[gpu.name] = price
    prices = {}
    for gpu in gpus:
        price = given.get(gpu.name) or book.cloud_price(tier, gpu)
        if price is None:
            raise SpecError(
                f"cost.usd_per_gpu_hour.{gpu.name}: the price book has no {tier} price for {gpu.name}; give one"
            )
        prices[gpu.name] = price if isinstance(price, float) else price.value
    return prices


def _check_ownership(
    study: Study, gpus: tuple[GpuSpec, ...], book: PriceBook, nic_gbps: tuple[float, ...], metrics: tuple[str, ...]
) -> None:
    """Owned-cluster metrics used as objectives or constraints need a server price for every GPU
    the study may pick, and NIC, switch-port and link prices at every speed its fabrics use."""
    owned = [m for m in metrics if m in OWNED_METRICS]
    if not owned:
        return
    for gpu in gpus:
        if gpu.name not in book.server_usd:
            raise SpecError(
                f"cost.server_usd.{gpu.name}: {owned[0]} needs a server price for {gpu.name}; the price book has "
                f"{', '.join(book.server_usd)}; give one"
            )
    for family in study.hardware.fabric.family:
        for speed in nic_gbps:
            fabric = Fabric(family=family, nic_gbps=speed)
            book.by_speed("nic_usd", speed)
            book.by_speed("switch_usd_per_port", fabric.port_gbps)
            book.by_speed("link_usd", fabric.port_gbps)


def _check_pipeline_split(settings, search, model: ModelSpec, pps: list[int]) -> None:
    """Every pp must split the layers some way the search offers; every vpp must fit some pp."""
    splits, explicit = search.pipeline_split, (settings.first_stage_layers, settings.last_stage_layers)
    if settings.pipeline_layout is not None:  # one layout fits one pipeline shape: all must take it
        layout = tuple(settings.pipeline_layout)
        for pp, vpp, split in itertools.product(pps, knob_values(search.vpp), splits):
            if problem := pp_problem(model, pp, vpp, split, *explicit, layout):
                raise SpecError(f"training.pipeline_layout: {problem} (search.pp={pp}, search.vpp={vpp})")
        return
    for pp in pps:
        problems = [pp_problem(model, pp, 1, split, *explicit) for split in splits]
        if pp > 1 and all(problems):
            raise SpecError(f"search.pp: {problems[0]}")
        if pp == 1 and (problem := pp_problem(model, 1)):
            raise SpecError(f"search.pp: {problem}")
    for vpp in knob_values(search.vpp):
        plans = [(pp, split) for pp in pps if pp > 1 for split in splits]
        if vpp > 1 and not any(not pp_problem(model, pp, vpp, split, *explicit) for pp, split in plans):
            why = f": {pp_problem(model, plans[0][0], vpp, plans[0][1], *explicit)}" if plans else " (vpp needs pp > 1)"
            raise SpecError(f"search.vpp: {vpp} chunks per stage fit no pp and pipeline_split of the search space{why}")


def _check_training(study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
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


def _check_serving(study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
    settings, search = study.serving, study.search
    if model.moe_experts:
        raise SpecError(f"model: {model.name} is a mixture-of-experts model; inference studies price dense models")
    for gpu in gpus:
        if problem := precision_problem(gpu, settings.precision):
            raise SpecError(f"serving.precision: {settings.precision!r}: {problem}")
    for field, values in (("search.tp", search.tp), ("search.decode_tp", search.decode_tp)):
        for value in knob_values(values):
            if problem := tp_problem(model, value):
                raise SpecError(f"{field}: {problem}")
    for value in knob_values(search.pp):
        if problem := pp_problem(model, value):
            raise SpecError(f"search.pp: {problem}")
    for field in ("profile_mlp", "profile_attention", "profile_all_reduce"):
        if path := getattr(settings, field):
            regular_file(path, f"serving.{field}", CALIBRATION_LIMIT)
    if settings.profile_mlp or settings.profile_attention or settings.profile_all_reduce:
        load_vidur_profile(settings.profile_mlp, settings.profile_attention, settings.profile_all_reduce)
    if settings.trace:
        regular_file(settings.trace, "serving.trace", TRACE_LIMIT)
        trace = load_trace(settings.trace, settings.max_tokens)
        if settings.arrival == "replay" and (trace.arrival_s is None or len(trace) < settings.requests):
            raise SpecError(
                f"serving.arrival: 'replay' needs a trace that records arrivals and holds serving.requests="
                f"{settings.requests} of them; {settings.trace} has "
                + ("no arrival times" if trace.arrival_s is None else f"{len(trace)} requests")
            )
    elif settings.arrival == "replay":
        raise SpecError("serving.arrival: 'replay' needs serving.trace; allowed without one: poisson, gamma")


def _check_calibration(path: str) -> None:
    """Parse the table once now, read through the front door, so a bad file stops the study
    before any trial (the simulators then read the same file by its path)."""
    text = read_text(path, "hardware.calibration", CALIBRATION_LIMIT)
    try:
        parse_calibration(text.splitlines(keepends=True), Path(path).name)
    except DseError as exc:
        raise SpecError(f"hardware.calibration: {exc}") from None


def _check_metrics(study: Study) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names, directions = [], []
    for i, objective in enumerate(study.objectives):
        metric = _metric(objective.metric, f"objectives[{i}].metric", study)
        if metric.name in names:
            raise SpecError(f"objectives[{i}].metric: {metric.name!r} is already an objective")
        names.append(metric.name)
        directions.append(objective.direction or metric.better)
    return tuple(names), tuple(directions)


def _metric(name: str, field: str, study: Study):
    try:
        metric = metrics_for(study.mode).lookup(name, field)
    except CatalogError as exc:
        raise SpecError(str(exc)) from None
    if metric.needs == "training.train_tokens" and study.training.train_tokens is None:
        raise SpecError(f"{field}: {name!r} needs training.train_tokens to be set")
    if metric.name in CAPACITY_METRICS and study.serving.qps is not None:
        raise SpecError(f"{field}: {name!r} comes from the capacity search; leave serving.qps unset")
    return metric
