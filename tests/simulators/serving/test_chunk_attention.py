"""A prompt chunk's attention against closed forms: chunks of one prompt add up to the prompt's
causal prefill (c^2 + 2 c past pairs telescope to L^2), and a small chunk after a long past
costs its pairs, not its own kernel's fixed cost scaled by the past."""

import numpy as np
import pytest

from simulators.serving._engine import _iteration_ns

SIZE = 20_000
ALPHA = 2e-12  # seconds per (token x token) of causal attention: a prefill of L tokens takes ALPHA L^2


def costs(fixed_s=0.0, kv_per_token_s=0.0):
    """Only the attention row: ALPHA L^2 (+ a fixed kernel cost); decode reads at kv_per_token_s."""
    table = np.zeros((7, SIZE))
    tokens = np.arange(SIZE, dtype=float)
    table[2] = ALPHA * tokens**2 + fixed_s
    table[5, 1] = kv_per_token_s
    table[5, 3] = 1.0
    return table


def chunk_s(table, c, past):
    latency, _ = _iteration_ns(table, c, 0, 0, np.array([c]), np.array([past]), 1, 0, 1, 1)
    return latency / 1e9


def test_the_chunks_of_one_prompt_add_up_to_its_prefill():
    table = costs()
    chunks, past, total = (2048, 2048, 2048, 1900), 0, 0.0
    for c in chunks:
        total += chunk_s(table, c, past)
        past += c
    assert total == pytest.approx(ALPHA * past**2, rel=1e-6)


def test_a_small_chunk_after_a_long_past_costs_its_pairs_and_its_reads():
    table = costs(fixed_s=20e-6, kv_per_token_s=1e-9)
    c, past = 4, 8188
    pairs_s = ALPHA * (c * c + 2 * c * past)
    tail = chunk_s(table, c, past)
    assert tail == pytest.approx(max(pairs_s + 20e-6 * (c * c + 2 * c * past) / (c + past) ** 2, 1e-9 * past), rel=1e-6)
    assert tail < 1e-4  # the old scaling, (20 us + ALPHA c^2) (1 + 2 past / c), gave 82 ms
