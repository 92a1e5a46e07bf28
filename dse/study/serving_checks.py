"""Checks of an inference study's knobs and input files before any trial."""

from __future__ import annotations

from dse.errors import SpecError
from dse.spec.fields import knob_values
from dse.spec.inputs import CALIBRATION_LIMIT, TRACE_LIMIT, regular_file
from dse.spec.reliability import ReliabilitySettings
from dse.spec.study import Study
from simulators.hardware import GpuSpec
from simulators.models import ModelSpec, get_model
from simulators.serving import load_trace, load_vidur_profile
from simulators.workload import pp_problem, precision_problem, tp_problem


def check_serving(study: Study, model: ModelSpec, gpus: tuple[GpuSpec, ...]) -> None:
    if study.hardware.fabric.failures.switches or study.hardware.fabric.failures.links:
        raise SpecError(
            "hardware.fabric.failures: not allowed in a serving study (its network is the deployment's, not the "
            "fabric's tiers); allowed: failures in training studies"
        )
    if study.reliability != ReliabilitySettings():  # a saved spec.yaml spells out the defaults
        raise SpecError(
            "reliability: not allowed in a serving study (its goodput metrics are a training run's); allowed: "
            "reliability in training studies"
        )
    settings, search = study.serving, study.search
    if any(search.speculative_tokens) and settings.draft_model is None:
        raise SpecError("serving.draft_model: needed where search.speculative_tokens holds a value above 0")
    if settings.draft_model is not None:
        draft = get_model(settings.draft_model, "serving.draft_model")
        if draft.vocab != model.vocab:
            raise SpecError(
                f"serving.draft_model: {draft.name}'s vocabulary {draft.vocab} differs from {model.name}'s "
                f"{model.vocab}; allowed: a draft sharing the model's tokenizer"
            )
    if not model.is_moe and set(search.moe_parallel) != {"tp"}:
        raise SpecError(f"search.moe_parallel: {model.name} is a dense model; allowed: [tp]")
    for gpu in gpus:
        if problem := precision_problem(gpu, settings.precision):
            raise SpecError(f"serving.precision: {settings.precision!r}: {problem}")
    # Data-parallel attention (dp_ep) does not split the heads, so a tp value only it can use
    # needs no head split; each candidate's layout checks the rest (simulators.serving Layout).
    if not (model.is_moe and "dp_ep" in search.moe_parallel):
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
