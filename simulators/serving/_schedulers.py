"""Replica schedulers as data: the traits the compiled batch forming reads, one entry a scheduler.

Why: the engine (`_engine.py`, which says what each trait does) forms a batch from a
replica's row of traits, never from a name, and the deployment's checks, its cost tables and
the study read the same traits; so a scheduler that is a new combination of them is one
`register_scheduler` call (here, or at run time) and nothing compares scheduler names. The
entries are a few booleans each, so they share this file as the topology families share theirs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulators._errors import SpecError
from simulators._registry import Registry
from simulators.serving._engine import (
    CHUNKED_PREFILL,
    MIXED,
    N_TRAITS,
    PAGED,
    PREFILL_PRIORITY,
    STATIC_BATCH,
    TOKEN_BUDGET,
)


@dataclass(frozen=True)
class Scheduler:
    """A replica scheduler by its traits (their meaning: `simulators/serving/_engine.py`).

    `decode_scheduler` names what a decode pool runs when this one prefills in a disaggregated
    deployment and cannot decode itself (only a paged, iteration-level scheduler can: a decode
    pool's requests arrive with a cache that grows)."""

    name: str
    help: str  # one line: what it does and where it comes from
    static_batch: bool = False
    paged: bool = False
    prefill_priority: bool = False
    mixed: bool = False
    token_budget: bool = False
    chunked_prefill: bool = False
    decode_scheduler: str | None = None
    aliases: tuple[str, ...] = ()
    start_checks: str = "vllm"  # whose start-up limits apply to its token budget (START_CHECKS)

    def __post_init__(self) -> None:
        where = f"scheduler {self.name!r}"
        iteration = (self.paged, self.prefill_priority, self.mixed, self.token_budget, self.chunked_prefill)
        if self.static_batch and any(iteration):
            raise SpecError(f"{where}: static_batch takes no other trait (it batches whole requests)")
        if not (self.static_batch or self.prefill_priority or self.mixed):
            raise SpecError(f"{where}: needs static_batch, prefill_priority or mixed (else it admits nothing)")
        if self.chunked_prefill and not (self.token_budget and (self.mixed or self.prefill_priority)):
            raise SpecError(
                f"{where}: chunked_prefill needs token_budget (chunks fill the budget) and mixed or prefill_priority"
            )
        if self.start_checks not in START_CHECKS:
            raise SpecError(f"{where}: start_checks {self.start_checks!r}; allowed: {', '.join(START_CHECKS)}")
        if self.can_decode == (self.decode_scheduler is not None):
            raise SpecError(f"{where}: decode_scheduler is for a scheduler that cannot decode, and needed by one")

    @property
    def can_decode(self) -> bool:
        """Whether it can run a decode pool."""
        return self.paged and not self.static_batch

    @property
    def decode_pool(self) -> str:
        """The scheduler of the decode pool when this one prefills."""
        return self.decode_scheduler or self.name

    def row(self) -> np.ndarray:
        """The engine's trait row (columns of `_engine.py`)."""
        row = np.zeros(N_TRAITS, np.bool_)
        for column, value in (
            (STATIC_BATCH, self.static_batch),
            (PAGED, self.paged),
            (PREFILL_PRIORITY, self.prefill_priority),
            (MIXED, self.mixed),
            (TOKEN_BUDGET, self.token_budget),
            (CHUNKED_PREFILL, self.chunked_prefill),
        ):
            row[column] = value
        return row


# The engines whose start-up checks of a token budget a scheduler follows (Pool.refusal):
# vLLM's SchedulerConfig (max_num_batched_tokens >= max_num_seqs, and >= max_model_len without
# chunked prefill; default max(max_model_len, 2048), 512 with chunked prefill) and
# TensorRT-LLM's (max_num_tokens >= max_input_len without context chunking; default 8192);
# SGLang's (any chunk size; default by the GPU's memory: 2048 below 35 GiB, 8192 below 160 GiB,
# 16384 above: sglang/srt/server_args.py, chunked_prefill_size).
START_CHECKS = ("vllm", "tensorrt_llm", "sglang")
# TensorRT-LLM's capacity policies (docs/source/performance/performance-tuning-guide/useful-runtime-flags.md,
# "Capacity Scheduler Policy"; llmapi SchedulerConfig.capacity_scheduler_policy): GUARANTEED_NO_EVICT, the
# default, starts a request only when it can finish without being paused; MAX_UTILIZATION packs as many as
# fit now and pauses requests when the KV cache runs out ("trtllm" below, as vLLM preempts).

SCHEDULERS: Registry[Scheduler] = Registry("scheduler")


def register_scheduler(scheduler: Scheduler) -> Scheduler:
    """Add `scheduler` to SCHEDULERS; a second one of the same name or alias is refused (its
    decode_scheduler is checked where a deployment uses it: it may be registered later)."""
    SCHEDULERS.register(scheduler.name, scheduler, scheduler.aliases)
    return scheduler


def get_scheduler(name: str, field: str = "scheduler") -> Scheduler:
    """The registered scheduler `name`; a one-line SpecError naming `field` and the schedulers otherwise."""
    return SCHEDULERS.choice(name, field)


def decoders() -> tuple[str, ...]:
    """The schedulers that can run a decode pool."""
    return tuple(name for name, s in SCHEDULERS.items() if s.can_decode)


for _scheduler in (
    Scheduler(
        "static",
        "FasterTransformer: a batch admitted into an empty replica, decoded until its longest request ends",
        static_batch=True,
        decode_scheduler="vllm",
    ),
    Scheduler(
        "orca",
        "Orca: iteration-level, whole prompts beside the decodes, memory for prompt + output reserved",
        mixed=True,
        decode_scheduler="vllm",
    ),
    Scheduler(
        "vllm",
        "vLLM: continuous batching on a paged KV cache, prefill-only iterations first",
        paged=True,
        prefill_priority=True,
        token_budget=True,
    ),
    Scheduler(
        "trtllm",
        "TensorRT-LLM, MAX_UTILIZATION capacity policy: in-flight batching of whole contexts beside "
        "generations on a paged KV cache, requests paused (recomputed) when it is full, within max_num_tokens "
        "(context chunking off)",
        paged=True,
        mixed=True,
        token_budget=True,
        start_checks="tensorrt_llm",
        aliases=("tensorrt-llm", "tensorrt_llm"),
    ),
    Scheduler(
        "trtllm_no_evict",
        "TensorRT-LLM's default GUARANTEED_NO_EVICT capacity policy with context chunking: a request starts "
        "only when its prompt + output fit in the KV cache (never paused); context chunks fill max_num_tokens "
        "beside the generations",
        mixed=True,
        token_budget=True,
        chunked_prefill=True,
        decode_scheduler="trtllm",
        start_checks="tensorrt_llm",
        aliases=("guaranteed_no_evict",),
    ),
    Scheduler(
        "sglang",
        "SGLang: prefill-only iterations first, prompts in chunks of max_batch_tokens (chunked_prefill_size), "
        "a prompt's next chunk before new ones; decodes in iterations of their own; paged KV cache",
        paged=True,
        prefill_priority=True,
        token_budget=True,
        chunked_prefill=True,
        start_checks="sglang",
    ),
    Scheduler(
        "sarathi",
        "Sarathi-Serve: decodes plus prompt chunks filling the token budget, paged KV cache",
        paged=True,
        mixed=True,
        token_budget=True,
        chunked_prefill=True,
    ),
):
    register_scheduler(_scheduler)
