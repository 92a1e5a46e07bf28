"""Speculative decoding: the tokens a verify step yields, where they arrive, what the draft costs."""

import numpy as np
import pytest

from simulators._errors import PlanError, SpecError
from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import Deployment, Pool, Requests, Speculation, simulate_deployment
from simulators.serving._deployment import _speculation_rows, pool_costs

H100 = get_gpu("H100-SXM")
LLAMA70B, LLAMA8B, LLAMA2_7B = get_model("llama3-70b"), get_model("llama3-8b"), get_model("llama2-7b")


def test_a_verify_step_yields_the_leviathan_expectation():
    """(1 - a^(k+1)) / (1 - a): nothing accepted yields one token, k = 3 at a = 0.5 yields 1.875."""
    assert Speculation(LLAMA8B, 3, 0.0).tokens_per_step == 1.0
    assert Speculation(LLAMA8B, 3, 0.5).tokens_per_step == pytest.approx(1.875)
    assert Speculation(LLAMA8B, 7, 0.8).tokens_per_step == pytest.approx((1 - 0.8**8) / 0.2)


def test_tokens_arrive_a_verify_step_at_a_time():
    """One request of 200 output tokens at E = 1.875 tokens a step: the first comes from the
    prefill, the other 199 from s steps, the fewest with floor(s * E) >= 199 (s = 107); each
    step's tokens arrive together, so exactly s gaps are positive."""
    spec = Speculation(LLAMA8B, 3, 0.5)
    deployment = Deployment(LLAMA70B, H100, Pool("sarathi", tp=4, max_batch_tokens=2048), speculation=spec)
    result = simulate_deployment(deployment, Requests(np.array([0.0]), np.array([512]), np.array([200])))
    steps = next(s for s in range(1, 400) if np.floor(s * 1.875) >= 199)
    assert steps == 107 and np.count_nonzero(result.gaps_ns) == steps and len(result.gaps_ns) == 199
    plain = simulate_deployment(
        Deployment(LLAMA70B, H100, Pool("sarathi", tp=4, max_batch_tokens=2048)),
        Requests(np.array([0.0]), np.array([512]), np.array([200])),
    )
    assert result.done_ns[0] < plain.done_ns[0]  # 107 longer steps beat 199 plain ones here
    steps_s = result.gaps_ns[result.gaps_ns > 0] / 1e9  # a client sees one delivery a step
    assert result.metrics["tbt_p50_s"] == pytest.approx(float(np.percentile(steps_s, 50)))


def test_the_draft_takes_its_weights_and_cache_from_the_targets_kv_blocks():
    """The largest block count whose target and draft caches fit beside the draft's weights in
    what the target's blocks held."""
    pool = Pool("sarathi", tp=4, max_batch_tokens=2048)
    deployment = Deployment(LLAMA70B, H100, pool, speculation=Speculation(LLAMA8B, 4, 0.7))
    target = pool_costs(deployment, 512)[0]
    step, per_token_s, shrunk = _speculation_rows(deployment, pool, target)
    block = target.block_tokens
    held = target.kv_blocks * target.kv_bytes_per_token_per_gpu * block
    draft_weights = LLAMA8B.total_params * 2 / 4
    per_block = (target.kv_bytes_per_token_per_gpu + 2 * LLAMA8B.layers * 2 * LLAMA8B.head_dim * 2) * block
    assert shrunk.kv_blocks * per_block + draft_weights <= held < (shrunk.kv_blocks + 1) * per_block + draft_weights
    assert (np.diff(step) >= 0).all() and per_token_s > 0  # a draft step grows with the decodes it runs


def test_drafts_the_engines_would_refuse_are_refused():
    requests = Requests(np.array([0.0]), np.array([64]), np.array([8]))
    with pytest.raises(PlanError, match="vocabulary 32000 differs from llama3-70b's 128256"):
        simulate_deployment(
            Deployment(LLAMA70B, H100, Pool(tp=4), speculation=Speculation(LLAMA2_7B, 3, 0.7)), requests
        )
    with pytest.raises(PlanError, match="needs pp=1 and tensor-parallel attention"):
        simulate_deployment(
            Deployment(LLAMA70B, H100, Pool(tp=4, pp=2), speculation=Speculation(LLAMA8B, 3, 0.7)), requests
        )
    with pytest.raises(SpecError, match=r"^speculative_acceptance: 1.0 is not allowed; allowed: a number in \[0, 1\)$"):
        Speculation(LLAMA8B, 3, 1.0)
