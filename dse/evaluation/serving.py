"""Inference candidates: a trial's knobs as a deployment, its request stream, and its metrics.

Every candidate of a study serves the same stream (same seed, same lengths); with `serving.qps`
unset each one's capacity is searched on the SLO and its latency metrics are those at capacity,
so deployments are compared where each is as busy as its SLO allows. Cost: rental $/hour of its
GPUs in the study's tier; QPS/$ = capacity / $ per hour; $/Mtok at the served rate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from dse.cost import Ownership, cost_metrics, ownership
from dse.spec.metrics import AT_LOAD_METRICS
from dse.spec.resolved import ResolvedStudy
from dse.spec.serving import LengthSettings, ServingSettings
from simulators.models import get_model
from simulators.network import Network
from simulators.serving import (
    Deployment,
    Pool,
    Requests,
    Speculation,
    VidurProfile,
    capacity_search,
    fixed,
    get_scheduler,
    load_trace,
    load_vidur_profile,
    make_requests,
    simulate_deployment,
    uniform,
    zipf,
)
from simulators.serving._capacity import meets


def deployment_of(resolved: ResolvedStudy, params: Mapping[str, Any]) -> Deployment:
    """The deployment a trial's knobs describe."""
    settings = resolved.study.serving
    gpu = next(g for g in resolved.gpus if g.name == params["gpu"])
    pool = Pool(
        scheduler=params["scheduler"],
        tp=params["tp"],
        pp=params["pp"],
        count=params["replicas"],
        max_batch_requests=params["max_batch_requests"],
        max_batch_tokens=params["max_batch_tokens"],
        moe_parallel=params["moe_parallel"],
    )
    decode = None
    if params["disaggregated"]:
        decode = Pool(
            get_scheduler(params["scheduler"]).decode_pool,
            tp=params["decode_tp"],
            count=params["decode_replicas"],
            max_batch_requests=params["max_batch_requests"],
            moe_parallel=params["moe_parallel"],
        )  # its token budget: the engine's default (Pool.token_budget); the knob is the prefill pool's
    return Deployment(
        resolved.model,
        gpu,
        pool,
        decode=decode,
        router=params["router"],
        precision=settings.precision,
        block_tokens=settings.block_tokens,
        memory_fraction=settings.memory_fraction,
        compute_fraction=resolved.compute_fraction[gpu.name],
        expert_imbalance=settings.expert_imbalance,
        prefix_hit=settings.prefix_share if params["prefix_caching"] else 0.0,
        speculation=_speculation(settings.draft_model, params["speculative_tokens"], params["speculative_acceptance"]),
        profile=_profile(settings.profile_mlp, settings.profile_attention, settings.profile_all_reduce),
        network=_forced_network(resolved, gpu),
    )


def _forced_network(resolved: ResolvedStudy, gpu) -> Network | None:
    """The GPU's reference network running the algorithms hardware.collective_algorithm forces
    (the tensor-parallel all-reduces, the expert all-to-alls); None, the reference itself, if none."""
    forced = resolved.study.hardware.forced_algorithms()
    return dataclasses.replace(Network.from_gpu(gpu), algorithms=forced) if forced else None


def _speculation(draft: str | None, tokens: int, acceptance: float | None) -> Speculation | None:
    """Speculative decoding with `tokens` draft tokens of `draft`, or None for none."""
    return Speculation(get_model(draft, "serving.draft_model"), tokens, acceptance) if tokens else None


def request_stream(settings: ServingSettings, seed: int) -> Callable[[float], Requests]:
    """The study's requests at a given rate (lengths fixed by the seed, arrivals by rate)."""
    if settings.trace:
        lengths = dict(trace=_trace(settings.trace, settings.max_tokens))
    else:
        lengths = dict(prompt=_lengths(settings.prompt), output=_lengths(settings.output))
    if settings.arrival == "replay":  # the recorded stream, its clock scaled to the rate asked
        recorded = make_requests(settings.requests, seed, rate_qps=None, **lengths)
        arrival_s = recorded.arrival_s - recorded.arrival_s[0]
        recorded_qps = (len(arrival_s) - 1) / arrival_s[-1]

    def at(qps: float) -> Requests:
        if settings.arrival == "replay":
            return Requests(arrival_s * recorded_qps / qps, recorded.prompt_tokens, recorded.output_tokens)
        return make_requests(settings.requests, seed, rate_qps=qps, arrival=settings.arrival, cv=settings.cv, **lengths)

    return at


@cache
def _profile(mlp: str | None, attention: str | None, all_reduce: str | None) -> VidurProfile | None:
    if not (mlp or attention or all_reduce):
        return None
    return load_vidur_profile(mlp_csv=mlp, attention_csv=attention, all_reduce_csv=all_reduce)


@cache
def _trace(path: str, max_tokens: int | None):
    return load_trace(path, max_tokens)


def _lengths(spec: LengthSettings):
    if spec.dist == "fixed":
        return fixed(spec.value)
    if spec.dist == "uniform":
        return uniform(spec.low, spec.high)
    return zipf(spec.theta, spec.low, spec.high)


def serve(resolved: ResolvedStudy, params: Mapping[str, Any]) -> tuple[dict[str, float], float, str | None]:
    """Metrics of the candidate (before its cost: `serving_costs`), its SLO excess (<= 0 when
    met) and the reason when it is not met."""
    settings = resolved.study.serving
    deployment = deployment_of(resolved, params)
    stream = request_stream(settings, resolved.study.seed)
    bounds = dict(ttft_p90_s=settings.ttft_p90_s, tbt_p99_s=settings.tbt_p99_s)
    capacity = None
    if settings.qps is None:
        found = capacity_search(deployment, stream, seed=resolved.study.seed, **bounds)
        capacity, result = found.qps, found.result
        lowest = min(qps for qps, _ in found.probes)
    else:
        result = simulate_deployment(deployment, stream(settings.qps), resolved.study.seed)
    metrics = dict(result.metrics) | {"num_gpus": float(deployment.gpus)}
    if capacity is not None:
        metrics["capacity_qps"] = capacity
        metrics |= _at_load(deployment, stream, settings.latency_load * capacity, resolved.study.seed)
    excess = max(metrics["ttft_p90_s"] / settings.ttft_p90_s, _finite(metrics["tbt_p99_s"]) / settings.tbt_p99_s) - 1
    reason = None
    if capacity == 0.0:
        reason = f"meets the SLO at no rate tried (down to {lowest:.3g} QPS)"
        excess = max(excess, 1.0)
    elif not meets(result, **bounds):
        reason = (
            f"ttft_p90_s={metrics['ttft_p90_s']:.3g} (bound {settings.ttft_p90_s:g}), "
            f"tbt_p99_s={metrics['tbt_p99_s']:.3g} (bound {settings.tbt_p99_s:g}) at {settings.qps:g} QPS"
        )
    return metrics, excess, reason


def _at_load(deployment: Deployment, stream: Callable[[float], Requests], qps: float, seed: int) -> dict[str, float]:
    """The latency percentiles at `qps` (a share of the capacity), as the *_at_load_s metrics;
    NaN where there is no capacity to take a share of."""
    names = [n for n in AT_LOAD_METRICS if n != "load_qps"]
    if qps <= 0:
        return dict.fromkeys(names, float("nan")) | {"load_qps": 0.0}
    metrics = simulate_deployment(deployment, stream(qps), seed).metrics
    return {name: metrics[name.replace("_at_load_s", "_s")] for name in names} | {"load_qps": qps}


def serving_costs(resolved: ResolvedStudy, params: Mapping[str, Any], metrics: Mapping[str, float]) -> dict[str, float]:
    """The cost metrics of a served candidate: rental and owned $/hour and $/Mtok of its output
    tokens, and QPS per $/hour where its capacity was searched."""
    deployment = deployment_of(resolved, params)
    owned = _ownership(resolved, deployment)
    price = resolved.usd_per_gpu_hour[deployment.gpu.name]
    served = {"tokens_per_s": metrics["throughput_tok_s"]}
    out = cost_metrics(served, deployment.gpus, price, None, owned, resolved.prices)
    if "capacity_qps" in metrics:
        out["qps_per_usd_hour"] = metrics["capacity_qps"] / (deployment.gpus * price)
        if owned is not None:
            out["qps_per_owned_usd_hour"] = metrics["capacity_qps"] / out["owned_usd_per_hour"]
    return out


def _ownership(resolved: ResolvedStudy, deployment: Deployment) -> Ownership | None:
    """Buying the deployment: whole servers of its GPUs on the study's first fabric family, with
    the GPUs' own NIC speed; None where the price book has no server price for the GPU."""
    settings = resolved.study.hardware.fabric
    per_server = settings.gpus_per_server
    gpus = -(-deployment.gpus // per_server) * per_server
    fabric = resolved.fabric(settings.family[0], deployment.gpu.nic_gbps)
    return ownership(deployment.gpu, gpus, fabric, resolved.prices)


def _finite(value: float) -> float:
    return 0.0 if value != value else value  # a run of one-token requests has no gaps
