"""Speculative decoding: a draft model proposes k tokens, the target verifies them in one step.

With each draft token accepted with probability `acceptance` (alpha) independently, a verify
step yields (1 - alpha^(k+1)) / (1 - alpha) tokens on average (Leviathan, Kalman and Matias,
"Fast Inference from Transformers via Speculative Decoding", ICML 2023, eq. 1). The draft runs
on the replica's own GPUs at the target's tensor parallelism (vLLM's default draft tensor-parallel
size), k decode steps for the batch's decodes before each verify step; its weights and its KV
cache of every sequence take HBM from the target's cache. Like vLLM, only pipeline-free replicas
with tensor-parallel attention speculate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from simulators._errors import PlanError, SpecError
from simulators.models import ModelSpec
from simulators.serving._cost import ReplicaCost


@dataclass(frozen=True)
class Speculation:
    """`tokens` draft tokens a step from `draft`, each accepted with probability `acceptance`."""

    draft: ModelSpec
    tokens: int
    acceptance: float

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or not isinstance(self.tokens, int) or not 1 <= self.tokens <= 15:
            raise SpecError(f"speculative_tokens: {self.tokens!r} is not allowed; allowed: an integer in 1..15")
        if not 0 <= self.acceptance < 1:
            raise SpecError(f"speculative_acceptance: {self.acceptance!r} is not allowed; allowed: a number in [0, 1)")

    @property
    def tokens_per_step(self) -> float:
        """Tokens a verify step yields on average (module docstring)."""
        a, k = self.acceptance, self.tokens
        return (1 - a ** (k + 1)) / (1 - a)

    def check(self, model: ModelSpec, pp: int, moe_parallel: str, block_tokens: int) -> None:
        """PlanError for a deployment the engines do not speculate on."""
        if self.draft.vocab != model.vocab:
            raise PlanError(
                f"draft model {self.draft.name}: vocabulary {self.draft.vocab} differs from {model.name}'s "
                f"{model.vocab}; a draft must share the target's tokenizer"
            )
        if pp > 1 or moe_parallel == "dp_ep":
            raise PlanError("speculative decoding: needs pp=1 and tensor-parallel attention (as vLLM does)")
        if self.tokens >= block_tokens:
            raise PlanError(f"speculative_tokens={self.tokens}: allowed below block_tokens={block_tokens}")

    def engine_rows(self, target: ReplicaCost, draft: ReplicaCost) -> tuple[np.ndarray, float, ReplicaCost]:
        """For the target's and the draft's cost tables (ReplicaCost, same width): the draft's
        k steps' unit (seconds of one draft step by decodes in the batch), its seconds per cached
        token of one step, and the target's cost with the draft's weights and cache taken out
        of its KV blocks."""
        layers = self.draft.layers
        n = np.arange(len(target.linear_s))
        logits = draft.logits_s[np.minimum(n, len(draft.logits_s) - 1)]
        step = layers * (draft.linear_s + draft.allreduce_s + draft.decode_attention_fixed_s) + logits
        per_token = layers * draft.decode_attention_per_token_s
        block = target.block_tokens
        free = target.kv_blocks * target.kv_bytes_per_token_per_gpu * block - draft.weight_bytes_per_gpu
        blocks = int(free // ((target.kv_bytes_per_token_per_gpu + draft.kv_bytes_per_token_per_gpu) * block))
        if blocks < 1:
            raise PlanError(f"draft model {self.draft.name}: its weights leave the target no KV cache")
        return step, float(per_token), dataclasses.replace(target, kv_blocks=blocks, request_blocks=blocks)
