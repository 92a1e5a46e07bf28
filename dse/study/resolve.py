"""Resolving a spec: every name to its catalogue entry, and the checks that apply to every
study mode (prices, metrics, calibration files); the mode's own checks are its kind's.
Run before any trial (fail fast)."""

from __future__ import annotations

from pathlib import Path

from dse.cost import PriceBook, price_book
from dse.errors import CatalogError, DseError, SpecError
from dse.spec.catalogs import gpu_catalogue, study_model, study_price_book
from dse.spec.inputs import CALIBRATION_LIMIT, read_text
from dse.spec.kind import STUDY_KINDS, StudyKind
from dse.spec.metrics import CAPACITY_METRICS, OWNED_METRICS
from dse.spec.resolved import ResolvedStudy
from dse.spec.study import Study
from simulators._registry import Registry
from simulators.hardware import GpuSpec, parse_calibration, sustained_compute_fraction
from simulators.network import Fabric


def resolve_study(study: Study) -> ResolvedStudy:
    """Resolve every name in `study` and prove each knob value can be part of a valid plan.
    The study's own catalogue files are read here, once; the result carries their entries."""
    model = study_model(study.model)
    catalogue = gpu_catalogue(study.hardware.gpu_catalog)
    gpus = tuple(catalogue.lookup(name, f"hardware.gpu[{i}]") for i, name in enumerate(study.hardware.gpu))
    book = price_book(study.cost.overrides(), study_price_book(study.cost.price_book))
    rental = _rental_prices(study, gpus, book, catalogue)
    kind = STUDY_KINDS.lookup(study.mode, "mode")
    kind.check(study, model, gpus)
    _check_fidelity(study, kind)
    if study.hardware.calibration:
        _check_calibration(study.hardware.calibration)
    nic_efficiency = collectives = None
    if path := study.hardware.network_calibration:  # read once here, so a bad file stops the study now
        from dse.spec.network_calibration import load_calibration

        calibration = load_calibration(path)
        nic_efficiency, collectives = calibration.nic_efficiency, calibration.collectives
    objectives, directions = _check_metrics(study, kind)
    constraints = tuple(
        c.model_copy(update={"metric": _metric(c.metric, f"constraints[{i}].metric", study, kind).name})
        for i, c in enumerate(study.constraints)
    )
    fabric = study.hardware.fabric
    speeds = fabric.nic_gbps or sorted({gpu.nic_gbps for gpu in gpus})
    nic_gbps = tuple(int(v) if float(v).is_integer() else float(v) for v in speeds)
    _check_ownership(study, gpus, book, nic_gbps, (*objectives, *(c.metric for c in constraints)))
    # Measured kernel times already include what the fitted fraction stands for.
    fraction = {gpu.name: _compute_fraction(study, gpu) for gpu in gpus}
    return ResolvedStudy(
        study,
        kind,
        model,
        gpus,
        rental,
        book,
        nic_gbps,
        objectives,
        directions,
        constraints,
        fraction,
        nic_efficiency,
        collectives,
    )


def _compute_fraction(study: Study, gpu: GpuSpec) -> float:
    """The share of modelled kernel speed `gpu`'s stack sustains: the spec's, 1 where kernel times
    are measured (they include it), else the one fitted for its software stack."""
    if study.hardware.compute_fraction is not None:
        return study.hardware.compute_fraction
    return 1.0 if study.hardware.calibration else sustained_compute_fraction(gpu)


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


def _check_calibration(path: str) -> None:
    """Parse the table once now, read through the front door, so a bad file stops the study
    before any trial (the simulators then read the same file by its path)."""
    text = read_text(path, "hardware.calibration", CALIBRATION_LIMIT)
    try:
        parse_calibration(text.splitlines(keepends=True), Path(path).name)
    except DseError as exc:
        raise SpecError(f"hardware.calibration: {exc}") from None


def _check_metrics(study: Study, kind: StudyKind) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names, directions = [], []
    for i, objective in enumerate(study.objectives):
        metric = _metric(objective.metric, f"objectives[{i}].metric", study, kind)
        if metric.name in names:
            raise SpecError(f"objectives[{i}].metric: {metric.name!r} is already an objective")
        names.append(metric.name)
        directions.append(objective.direction or metric.better)
    return tuple(names), tuple(directions)


def _metric(name: str, field: str, study: Study, kind: StudyKind):
    try:
        metric = kind.metrics.lookup(name, field)
    except CatalogError as exc:
        raise SpecError(str(exc)) from None
    if metric.needs == "training.train_tokens" and study.training.train_tokens is None:
        raise SpecError(f"{field}: {name!r} needs training.train_tokens to be set")
    if metric.name in CAPACITY_METRICS and study.serving.qps is not None:
        raise SpecError(f"{field}: {name!r} comes from the capacity search; leave serving.qps unset")
    return metric


def _check_fidelity(study: Study, kind: StudyKind) -> None:
    """A ladder level must apply to the study's kind (a mode without collectives to re-price has
    its levels off by default), the packet level's congestion control must exist, and its loss
    recovery must suit the fabrics' routing."""
    fidelity = study.fidelity
    if not kind.replays_collectives:
        named = [name for name, _ in fidelity.levels()] + (["validate_top"] if fidelity.validate_top else [])
        if named:
            raise SpecError(f"fidelity.{named[0]}: re-evaluates collectives, which {kind.name} studies do not time")
    from simulators.fidelity import LEVELS

    for name, _ in fidelity.levels():
        LEVELS.choice(name, f"fidelity.{name}")
    if fidelity.packet is not None:
        from simulators.packet import CONGESTION_CONTROLS

        CONGESTION_CONTROLS.choice(fidelity.packet.congestion_control, "fidelity.packet.congestion_control")
        from simulators.network import get_family

        sprayed = [f for f in study.hardware.fabric.family if get_family(f).adaptive_routing]
        if fidelity.packet.loss_recovery == "go_back_n" and sprayed:
            raise SpecError(
                f"fidelity.packet.loss_recovery: 'go_back_n' discards the packets adaptive routing reorders "
                f"(family {sprayed[0]}); allowed: selective_repeat, none, or unset (the NICs' own)"
            )
