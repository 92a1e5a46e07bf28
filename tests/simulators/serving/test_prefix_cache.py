"""Prefix caching: a request prefills only what the cache lacks, its chunk attending to the
cached keys as well."""

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import Deployment, Pool, Requests, simulate_deployment
from simulators.serving._deployment import cached_tokens, pool_costs

H100, LLAMA8B = get_gpu("H100-SXM"), get_model("llama3-8b")


def one(prompt: int) -> Requests:
    return Requests(np.array([0.0]), np.array([prompt]), np.array([1]))


def test_the_cache_holds_whole_blocks_and_never_the_last_token():
    assert list(cached_tokens(np.array([100, 32, 17, 1]), 0.5, 16)) == [48, 16, 0, 0]
    assert list(cached_tokens(np.array([64, 16]), 0.999, 16)) == [48, 0]  # the last token is computed
    assert list(cached_tokens(np.array([64]), 0.0, 16)) == [0]


def test_a_cached_prefix_leaves_its_keys_to_the_attention_only():
    """A lone 2048-token prompt with 1024 cached is one iteration of 1024 tokens whose chunk
    attends to 1024 cached keys too: the time of the 1024-token prompt with, per layer, the
    attention of a 2048-token prefill for 3/4 of its pairs (c^2 + 2 c p of (c + p)^2) in place
    of the 1024-token one (the cost model's chunk rule; its floor, reading 1024 cached tokens
    as a decode does, is far below)."""
    pool = Pool("sarathi", max_batch_tokens=4096)
    cached = Deployment(LLAMA8B, H100, pool, prefix_hit=0.5)
    short = Deployment(LLAMA8B, H100, pool)
    with_cache = simulate_deployment(cached, one(2048)).first_token_ns[0]
    half = simulate_deployment(short, one(1024)).first_token_ns[0]
    cost = pool_costs(short, 2048)[0]
    chunk_s = cost.prefill_attention_s[2048] * 0.75
    assert chunk_s > cost.decode_attention_per_token_s * 1024
    extra_s = LLAMA8B.layers * (chunk_s - cost.prefill_attention_s[1024])
    assert with_cache - half == pytest.approx(extra_s * 1e9, abs=2)
    assert with_cache < simulate_deployment(short, one(2048)).first_token_ns[0]


def test_a_prefix_hit_share_is_checked():
    with pytest.raises(SpecError, match=r"^prefix_hit: 1.0 is not allowed; allowed: a number in \[0, 1\)$"):
        Deployment(LLAMA8B, H100, Pool(), prefix_hit=1.0)
