"""SGLang's scheduler: prompts in chunks of its chunk size, run in prefill-only iterations before
any decode (a prompt's next chunk first), and the chunk size SGLang picks from the GPU's memory."""

import numpy as np

from simulators.hardware import get_gpu
from simulators.models import get_model
from simulators.serving import Deployment, Pool, Requests, simulate_deployment

H100, LLAMA8B = get_gpu("H100-SXM"), get_model("llama3-8b")
CHUNK = 2048


def run(scheduler, requests):
    pool = Pool(scheduler, max_batch_requests=32, max_batch_tokens=CHUNK)
    return simulate_deployment(Deployment(LLAMA8B, H100, pool), requests)


def test_the_default_chunk_follows_the_gpus_memory_as_sglang_sets_it():
    # sglang/srt/server_args.py: 2048 below 35 GiB, 8192 below 160 GiB, 16384 above, 4096 unknown.
    assert [Pool("sglang").token_budget(20000, gib) for gib in (32, 80, 141, 180)] == [2048, 8192, 8192, 16384]
    assert Pool("sglang").token_budget(20000) == 4096
    assert Pool("sglang").refusal(20000, 19000) is None  # any prompt is chunked


def test_a_lone_prompt_is_chunked_exactly_as_sarathi_chunks_it():
    """With nothing decoding, SGLang's prefill iterations and Sarathi's mixed ones carry the
    same chunks (2048, 2048, 904 tokens), so the first token comes at the same time."""
    lone = Requests(np.array([0.0]), np.array([2 * CHUNK + 904]), np.array([3]))
    sglang, sarathi = run("sglang", lone), run("sarathi", lone)
    assert sglang.first_token_ns[0] == sarathi.first_token_ns[0]
    assert sglang.done_ns[0] == sarathi.done_ns[0]


def test_decodes_wait_while_a_long_prompt_is_prefilled_in_its_own_iterations():
    """A decodes when B (4 chunks) arrives: SGLang runs B's four chunks back to back before A's
    next token, Sarathi runs one chunk beside each of A's decodes; so A's longest gap between
    tokens spans about four chunk iterations under SGLang and about one under Sarathi."""
    requests = Requests(np.array([0.0, 0.5]), np.array([100, 4 * CHUNK]), np.array([200, 2]))
    gaps = {name: run(name, requests).gaps_ns[:199] for name in ("sglang", "sarathi")}
    assert gaps["sglang"].max() >= 3 * gaps["sarathi"].max()
    assert gaps["sglang"].sum() > gaps["sarathi"].sum()
