"""A serving deployment and one simulated run of it: requests in, latency and throughput out.

A deployment is a model on one GPU type, as one pool of identical replicas (each runs whole
requests) or, disaggregated, a prefill pool and a decode pool with their own parallelism and
counts. `simulate_deployment` prices each pool's iterations (`replica_cost`), the KV transfer
between pools over the NIC fabric, runs the compiled engine and summarises the requests.

Metrics (seconds unless named otherwise): TTFT (arrival to first token), TBT (every gap between
consecutive token deliveries of a request, pooled over requests: the tokens a speculative step
yields together arrive as one, as a streaming client measures inter-token latency), TPOT ((end -
first token) / (output - 1) per request), end-to-end and normalised latency (end-to-end / output
tokens) at p50/p90/p99; output and total tokens/s and requests/s over the run (first arrival to
last completion); SLO attainment and goodput: a request meets the SLO when its TTFT and its TPOT
are within the bounds (DistServe's per-request convention); KV-cache use and batch sizes; MFU
(model FLOPs over the replicas' peak) and MBU (weight and KV bytes read over their HBM
bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from simulators._errors import PlanError, SpecError
from simulators.hardware import PRECISIONS, GpuSpec
from simulators.models import ModelSpec
from simulators.network import Network, collective_time_s
from simulators.serving._cost import KV_BYTES, ReplicaCost, replica_cost
from simulators.serving._engine import ROLE_BOTH, ROLE_DECODE, ROLE_PREFILL, EngineOutput, simulate_serving
from simulators.serving._profile import apply_profile
from simulators.serving._profile_files import VidurProfile
from simulators.serving._requests import Requests
from simulators.serving._routers import get_router
from simulators.serving._schedulers import SCHEDULERS, decoders, get_scheduler
from simulators.serving._speculative import Speculation

PERCENTILES = (50, 90, 99)


def _positive_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise SpecError(f"{name}: {value!r} is not allowed; allowed: a positive integer")


@dataclass(frozen=True)
class Pool:
    """`count` replicas of tp x pp GPUs running `scheduler`. `max_batch_tokens` is the token
    budget of an iteration (vLLM's max_num_batched_tokens, Sarathi's chunk size); None: the
    engine's default for the workload (`token_budget`)."""

    scheduler: str = "sarathi"
    tp: int = 1
    pp: int = 1
    count: int = 1
    max_batch_requests: int = 128
    max_batch_tokens: int | None = None
    moe_parallel: str = "tp"  # how a stage's tp GPUs share an MoE layer (simulators.serving.MOE_PARALLEL)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scheduler", get_scheduler(self.scheduler).name)
        for name in ("tp", "pp", "count", "max_batch_requests"):
            _positive_int(name, getattr(self, name))
        if self.max_batch_tokens is not None:
            _positive_int("max_batch_tokens", self.max_batch_tokens)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.count

    def token_budget(self, longest_tokens: int, hbm_gib: float | None = None) -> int:
        """`max_batch_tokens`, or where unset the engine's default for a workload whose longest
        request is `longest_tokens` on GPUs of `hbm_gib` (_schedulers.START_CHECKS): vLLM's
        max(max_model_len, 2048) without chunked prefill, 512 with it (as in Sarathi-Serve);
        TensorRT-LLM's 8192; SGLang's chunk by the GPU's memory (4096 where it is not known)."""
        if self.max_batch_tokens is not None:
            return self.max_batch_tokens
        scheduler = get_scheduler(self.scheduler)
        if scheduler.start_checks == "tensorrt_llm":
            return 8192
        if scheduler.start_checks == "sglang":
            return 4096 if hbm_gib is None else 2048 if hbm_gib < 35 else 8192 if hbm_gib < 160 else 16384
        return 512 if scheduler.chunked_prefill else max(longest_tokens, 2048)

    def refusal(self, longest_tokens: int, longest_prompt: int) -> str | None:
        """Why the serving engine would refuse these limits at start-up for a workload whose
        longest request is `longest_tokens` (prompt + output: the max_model_len it must be
        configured with) and longest prompt `longest_prompt`, or None (_schedulers.START_CHECKS):
        vLLM's SchedulerConfig checks max_num_batched_tokens >= max_num_seqs, and >=
        max_model_len unless chunked prefill is on (a budget below a whole request "effectively
        limits the maximum sequence length"); TensorRT-LLM checks max_num_tokens >=
        max_input_len unless context chunking is on."""
        scheduler, budget = get_scheduler(self.scheduler), self.token_budget(longest_tokens)
        if not scheduler.token_budget or scheduler.start_checks == "sglang":  # SGLang chunks any prompt
            return None
        where = f"scheduler {self.scheduler}: max_batch_tokens {budget}"
        chunking = ", ".join(name for name, s in SCHEDULERS.items() if s.chunked_prefill)
        if scheduler.start_checks == "tensorrt_llm":
            if not scheduler.chunked_prefill and budget < longest_prompt:
                return (
                    f"{where} is below the longest prompt ({longest_prompt} tokens); without context chunking "
                    f"TensorRT-LLM refuses a max_num_tokens below max_input_len; "
                    f"allowed: max_batch_tokens >= {longest_prompt}, or a scheduler with chunked prefill ({chunking})"
                )
            return None
        if budget < self.max_batch_requests:
            return (
                f"{where} is below max_batch_requests {self.max_batch_requests} "
                f"(vLLM refuses max_num_batched_tokens < max_num_seqs); "
                f"allowed: max_batch_tokens >= {self.max_batch_requests}"
            )
        if not scheduler.chunked_prefill and budget < longest_tokens:
            return (
                f"{where} is below the longest request ({longest_tokens} tokens); without chunked prefill "
                f"vLLM refuses a max_num_batched_tokens below max_model_len; "
                f"allowed: max_batch_tokens >= {longest_tokens}, or a scheduler with chunked prefill ({chunking})"
            )
        return None


@dataclass(frozen=True)
class Deployment:
    """One model served on one GPU type: `pool` serves whole requests, or with `decode` set,
    `pool` only prefills and `decode` only decodes (prefill/decode disaggregation)."""

    model: ModelSpec
    gpu: GpuSpec
    pool: Pool
    decode: Pool | None = None
    router: str = "round_robin"
    precision: str = "bf16"
    kv_precision: str = "bf16"
    block_tokens: int = 16
    memory_fraction: float = 0.9  # vLLM's gpu_memory_utilization default
    compute_fraction: float = 1.0
    expert_imbalance: float = 1.0  # an MoE layer's busiest expert-parallel GPU over the mean (1: balanced)
    prefix_hit: float = 0.0  # share of each prompt found in the prefix cache (0: no prefix caching)
    speculation: Speculation | None = None  # speculative decoding where the requests decode
    network: Network | None = None  # default: the GPU's reference system
    profile: VidurProfile | None = None  # measured operation times replacing the analytical ones

    def __post_init__(self) -> None:
        object.__setattr__(self, "router", get_router(self.router).name)
        if self.decode is not None and not get_scheduler(self.decode.scheduler).can_decode:
            allowed = ", ".join(decoders())
            raise SpecError(f"decode.scheduler: {self.decode.scheduler!r} is not allowed; allowed: {allowed}")
        for name, allowed in (("precision", PRECISIONS), ("kv_precision", tuple(KV_BYTES))):
            if getattr(self, name) not in allowed:
                raise SpecError(f"{name}: {getattr(self, name)!r} is not allowed; allowed: {', '.join(allowed)}")
        _positive_int("block_tokens", self.block_tokens)
        for name in ("memory_fraction", "compute_fraction"):
            if not 0 < getattr(self, name) <= 1:
                raise SpecError(f"{name}: {getattr(self, name)!r} is not allowed; allowed: a number in (0, 1]")
        if not 0 <= self.prefix_hit < 1:
            raise SpecError(f"prefix_hit: {self.prefix_hit!r} is not allowed; allowed: a number in [0, 1)")
        if not 1 <= self.expert_imbalance <= 64:
            raise SpecError(f"expert_imbalance: {self.expert_imbalance!r} is not allowed; allowed: a number in [1, 64]")

    @property
    def gpus(self) -> int:
        return self.pool.gpus + (self.decode.gpus if self.decode else 0)

    @property
    def fabric_network(self) -> Network:
        return self.network if self.network is not None else Network.from_gpu(self.gpu)


@dataclass(frozen=True)
class ServingResult:
    """The run's metrics and the engine's raw output; per-request times are ns from the first
    arrival's clock."""

    metrics: dict[str, float]
    engine: EngineOutput = field(repr=False)

    @property
    def first_token_ns(self) -> np.ndarray:
        return self.engine.first_ns

    @property
    def done_ns(self) -> np.ndarray:
        return self.engine.done_ns

    @property
    def replica(self) -> np.ndarray:
        return self.engine.replica

    @property
    def preemptions(self) -> np.ndarray:
        return self.engine.preemptions

    @property
    def gaps_ns(self) -> np.ndarray:
        return self.engine.gaps_ns


@dataclass(frozen=True)
class SLO:
    ttft_s: float = 2.0
    tbt_s: float = 0.2


def pool_costs(deployment: Deployment, max_prompt: int) -> tuple[ReplicaCost, ReplicaCost | None]:
    """The iteration tables of the pool(s), all of one width: the largest batch (in tokens or in
    sequences) any pool can form; the engine extrapolates past it only for whole-prompt batches
    larger than 32k tokens."""
    pools = [p for p in (deployment.pool, deployment.decode) if p is not None]
    tokens = max(
        max(p.max_batch_tokens, max_prompt)
        if get_scheduler(p.scheduler).token_budget
        else p.max_batch_requests * max_prompt  # whole prompts of a full batch
        for p in pools
    )
    width = max(min(tokens, 1 << 15), max(p.max_batch_requests for p in pools))

    def cost(pool: Pool) -> ReplicaCost:
        analytical = _tables(
            deployment,
            deployment.model,
            pool.tp,
            pool.pp,
            width,
            moe_parallel=pool.moe_parallel,
            expert_imbalance=deployment.expert_imbalance,
        )
        if deployment.profile is None:
            return analytical
        return apply_profile(analytical, deployment.profile, deployment.model, pool.tp)

    return cost(deployment.pool), (cost(deployment.decode) if deployment.decode else None)


def _speculation_rows(deployment: Deployment, pool: Pool, target: ReplicaCost):
    """The draft's engine rows for `pool` and its target cost with the draft's memory taken out
    (simulators/serving/_speculative.py)."""
    speculation = deployment.speculation
    speculation.check(deployment.model, pool.pp, pool.moe_parallel, deployment.block_tokens)
    draft = _tables(deployment, speculation.draft, pool.tp, 1, len(target.linear_s) - 1)
    return speculation.engine_rows(target, draft)


def _tables(deployment: Deployment, model: ModelSpec, tp: int, pp: int, width: int, **moe) -> ReplicaCost:
    """`model`'s iteration tables on tp x pp of the deployment's GPUs, `width` tokens and
    sequences wide, with the deployment's precision, memory and compute settings."""
    return replica_cost(
        model,
        deployment.gpu,
        tp,
        pp,
        deployment.fabric_network,
        precision=deployment.precision,
        max_batch_tokens=width,
        max_batch_requests=width,
        block_tokens=deployment.block_tokens,
        memory_fraction=deployment.memory_fraction,
        compute_fraction=deployment.compute_fraction,
        kv_precision=deployment.kv_precision,
        **moe,
    )


def cached_tokens(prompt: np.ndarray, hit: float, block_tokens: int) -> np.ndarray:
    """Tokens of each prompt found in the prefix cache: the `hit` share (< 1) rounded down to
    whole blocks (vLLM caches full blocks only), so never the last token, which is always
    computed (its logits give the first output token)."""
    return np.floor(prompt * hit / block_tokens).astype(np.int64) * block_tokens


def kv_transfer_s(deployment: Deployment, cost: ReplicaCost, prompt_tokens: np.ndarray) -> np.ndarray:
    """Seconds to move each prompt's KV cache from a prefill replica to a decode replica: every
    GPU of the prefill replica sends its share over its own NIC at once."""
    gpus = cost.tp * cost.pp
    network = deployment.fabric_network
    per_gpu = np.maximum(prompt_tokens, 1) * cost.kv_bytes_per_token / gpus
    return np.asarray(collective_time_s("send_recv", per_gpu, 2, network.domain_gpus, network), dtype=np.float64)


def simulate_deployment(deployment: Deployment, requests: Requests, seed: int = 0, slo: SLO = SLO()) -> ServingResult:
    """Serve `requests` on `deployment`; PlanError if the engine would refuse a pool's limits for
    these requests (`Pool.refusal`) or a request can never fit a replica's KV cache."""
    if len(requests) == 0:
        raise SpecError("requests: 0 requests; allowed: at least one")
    prompt = np.asarray(requests.prompt_tokens, dtype=np.int64)
    output = np.asarray(requests.output_tokens, dtype=np.int64)
    longest = {ROLE_BOTH: int((prompt + output).max()), ROLE_PREFILL: int(prompt.max()) + 1}
    longest[ROLE_DECODE] = longest[ROLE_BOTH]
    roles = [(deployment.pool, ROLE_PREFILL if deployment.decode else ROLE_BOTH)]
    roles += [(deployment.decode, ROLE_DECODE)] if deployment.decode else []
    for pool, role in roles:  # before the cost tables: a refused deployment costs nothing to price
        refusal = pool.refusal(longest[role], int(prompt.max()))
        if refusal:
            raise PlanError(("decode pool: " if role == ROLE_DECODE else "") + refusal)
    roles = [
        (replace(pool, max_batch_tokens=pool.token_budget(longest[role], deployment.gpu.hbm_gib)), role)
        for pool, role in roles
    ]
    deployment = replace(deployment, pool=roles[0][0], decode=roles[1][0] if deployment.decode else None)
    main, dec = pool_costs(deployment, int(prompt.max()))
    pools = [(pool, cost, role) for (pool, role), cost in zip(roles, (main, dec))]
    tables = np.zeros((len(pools), 7, len(main.linear_s)))
    tables[:, 5, 3] = 1.0  # tokens a decode step yields
    if deployment.speculation is not None:  # the pool where requests decode speculates
        k = len(pools) - 1
        pool, cost, role = pools[k]
        tables[k, 6], tables[k, 5, 4], cost = _speculation_rows(deployment, pool, cost)
        tables[k, 5, 2:4] = (deployment.speculation.tokens, deployment.speculation.tokens_per_step)
        pools[k] = (pool, cost, role)
    for pool, cost, role in pools:
        if -(-longest[role] // cost.block_tokens) > cost.request_blocks:
            raise PlanError(
                f"a request of {longest[role]} tokens does not fit the KV cache of a tp={pool.tp} pp={pool.pp} "
                f"replica ({cost.request_blocks * cost.block_tokens} tokens for one request)"
            )
    for k, (_, c, _) in enumerate(pools):
        for row, values in enumerate((c.linear_s, c.allreduce_s, c.prefill_attention_s, c.send_s, c.logits_s)):
            tables[k, row] = values
        tables[k, 5, :2] = (c.decode_attention_fixed_s, c.decode_attention_per_token_s)
    replicas = [(k, pool, cost, role) for k, (pool, cost, role) in enumerate(pools) for _ in range(pool.count)]
    transfer = kv_transfer_s(deployment, main, prompt) if dec else np.zeros(len(prompt))
    start_ns = np.int64(round(float(requests.arrival_s[0]) * 1e9))
    arrival_ns = np.round(np.asarray(requests.arrival_s) * 1e9).astype(np.int64) - start_ns
    out = EngineOutput(
        *simulate_serving(
            arrival_ns,
            prompt,
            output,
            cached_tokens(prompt, deployment.prefix_hit, deployment.block_tokens),
            np.round(transfer * 1e9).astype(np.int64),
            np.array([role for *_, role in replicas], np.int64),
            np.array([get_scheduler(pool.scheduler).row() for _, pool, _, _ in replicas]),
            np.array([k for k, *_ in replicas], np.int64),
            np.array([pool.pp for _, pool, _, _ in replicas], np.int64),
            np.array([cost.layers_per_stage for *_, cost, _ in replicas], np.float64),
            np.array([pool.max_batch_requests for _, pool, _, _ in replicas], np.int64),
            np.array([pool.max_batch_tokens for _, pool, _, _ in replicas], np.int64),
            np.array([cost.kv_blocks for *_, cost, _ in replicas], np.int64),
            deployment.block_tokens,
            tables,
            *get_router(deployment.router).codes,
            seed,
            main.flops_per_token,
            main.attention_flops_per_pair,
        )
    )
    replica_costs = [cost for *_, cost, _ in replicas]
    metrics = _metrics(deployment, arrival_ns, prompt, output, out, replica_costs, slo)
    return ServingResult(metrics, out)


def _percentiles(prefix: str, values_s: np.ndarray) -> dict[str, float]:
    if len(values_s) == 0:
        return {f"{prefix}_p{p}_s": float("nan") for p in PERCENTILES}
    points = np.percentile(values_s, PERCENTILES)
    return {f"{prefix}_p{p}_s": float(v) for p, v in zip(PERCENTILES, points)}


def _metrics(deployment, arrival_ns, prompt, output, out: EngineOutput, costs, slo: SLO) -> dict[str, float]:
    first, done = out.first_ns, out.done_ns
    ttft = (first - arrival_ns) / 1e9
    e2e = (done - arrival_ns) / 1e9
    tpot = np.where(output > 1, (done - first) / 1e9 / np.maximum(output - 1, 1), 0.0)
    duration_s = (done.max() - arrival_ns.min()) / 1e9
    met = (ttft <= slo.ttft_s) & (tpot <= slo.tbt_s)
    iterations = int(out.iterations.sum())
    blocks = np.array([c.kv_blocks for c in costs], dtype=float)
    main = costs[0]
    # Every iteration reads its replica's weights once (all its GPUs) and the KV of its decodes.
    weights = np.array([c.weight_bytes_per_gpu * c.tp * c.pp for c in costs])
    bytes_read = float(np.dot(out.iterations, weights)) + out.kv_read_tokens * main.kv_bytes_per_token
    gpus = deployment.gpus
    return {
        **_percentiles("ttft", ttft),
        **_percentiles("tbt", out.gaps_ns[out.gaps_ns > 0] / 1e9),  # tokens of one step arrive as one
        **_percentiles("tpot", tpot[output > 1]),
        **_percentiles("e2e", e2e),
        **_percentiles("normalized_latency", e2e / output),
        "throughput_tok_s": float(output.sum() / duration_s),
        "total_tok_s": float((output.sum() + prompt.sum()) / duration_s),
        "requests_per_s": float(len(output) / duration_s),
        "slo_attainment": float(met.mean()),
        "goodput_rps": float(met.sum() / duration_s),
        "batch_size_mean": float(out.batch_requests_sum.sum() / max(iterations, 1)),
        "batch_tokens_mean": float(out.batch_tokens_sum.sum() / max(iterations, 1)),
        "kv_utilisation_mean": float((out.block_ns / np.maximum(out.busy_ns, 1) / blocks).mean()),
        "kv_utilisation_peak": float((out.peak_blocks / blocks).max()),
        "preemptions": float(out.preemptions.sum()),
        "mfu": float(out.flops / (duration_s * gpus * main.peak_flops_per_gpu)),
        "mbu": float(bytes_read / (duration_s * gpus * main.hbm_bytes_per_s)),
        "duration_s": float(duration_s),
    }
