"""The request-level serving simulator: replicas, their schedulers and a global router (Numba).

Time is integer nanoseconds. Events are request arrivals, KV transfers reaching the decode pool
(prefill/decode disaggregation) and batches finishing; at equal times a finishing batch goes
first (it frees memory), then transfers, then arrivals, each in index order; a replica touched
by any of them schedules once all events of that instant are in (so requests arriving together
batch together), and a run is a pure function of its inputs.

A replica runs batches of (request, tokens) pairs; with pp pipeline stages up to pp batches are
in flight, a new one entering when the first stage is free, and a request is in at most one.
Its scheduler is a row of `replica_traits` (columns below; the registered combinations are in
`_schedulers.py`), never a name, so a scheduler that combines them anew needs no kernel edit:
- STATIC_BATCH: a batch is admitted only into an empty replica (memory for prompt + output
  reserved), prefilled together, then decoded as a whole until its longest request ends;
  finished requests stay as padding, arrivals wait.
- PAGED: KV blocks (of `block_tokens`) are allocated as a sequence grows; when a decode needs a
  block and none is free, the most recently admitted request not in flight is preempted (its
  blocks freed; recomputed from its prompt and the tokens it had produced when readmitted, at
  the front of the queue). Otherwise admission reserves prompt + output and nothing is preempted.
- PREFILL_PRIORITY: an iteration is prefill-only when the head of the queue fits (vLLM).
- MIXED: prompts join the running decodes in every iteration (Orca, Sarathi-Serve).
- TOKEN_BUDGET: an iteration carries at most max_batch_tokens tokens (an oversized prompt runs
  alone); without it a batch is bounded by its request cap only.
- CHUNKED_PREFILL: prompts are cut into chunks that fill the budget; with MIXED the decodes
  count against it (Sarathi-Serve), with PREFILL_PRIORITY the chunks run in prefill-only
  iterations, a prompt's next chunk first, whenever one is left or the queue's head can start
  (SGLang); without it a prompt that does not fit the budget left waits.
A request may arrive with the first `cached` tokens of its prompt already in the replica's prefix
cache (vLLM's automatic prefix caching, SGLang's radix cache): it prefills only the rest, its
chunks attend to the cached keys too, and its blocks cover the whole prompt (each request's
copy counted, as if no two shared a block); preempted, it keeps its cached prefix.
Speculative decoding (a replica's cost row 5 holds k draft tokens and E, the tokens a verify
step yields on average): a decode carries 1 + k tokens through the model, the draft model's k
steps are priced before it (row 6 by decodes, plus a cost per cached token), and each request
gains floor(c + E) - floor(c) tokens a step, c its running sum of E (integer tokens, the mean
exact, a run still a pure function of its inputs); tokens of one step arrive together.
Roles: a replica serves whole requests, only prefills (its requests leave after the first token,
their KV sent to the decode pool, which costs `transfer_ns`), or only decodes. The router is a
starting rule and a balancing flag (`_route`; the registered ones are in `_routers.py`).

Why one loop and one file: the event handlers share some thirty arrays; moved into @njit
functions of their own (the batch-end handler, the batch forming) the kernel ran 1.7x to 2.2x
slower, and about as slow with inline="always", so they stay in this function. The small
helpers (queue, running list, heap, routing) and the codes the kernel reads live in this file
too: Numba's on-disk cache keys a kernel on the content of its own file only, so a helper
edited in another file would leave the cached kernel running the old one.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

ROLE_BOTH, ROLE_PREFILL, ROLE_DECODE = 0, 1, 2
NEVER = np.iinfo(np.int64).max
# Request states
UNSEEN, WAITING, RUNNING, MOVING, DONE = 0, 1, 2, 3, 4
# Columns of replica_traits (see above; named by `_schedulers.Scheduler`)
STATIC_BATCH, PAGED, PREFILL_PRIORITY, MIXED, TOKEN_BUDGET, CHUNKED_PREFILL = range(6)
N_TRAITS = 6
UNLIMITED = 1 << 40  # tokens left in an iteration without a budget
# Where a router's scan of its pool starts (`_routers.Router.start`)
START_FIRST, START_ROTATE, START_RANDOM = 0, 1, 2


@numba.njit(cache=True)
def _iteration_ns(
    cost, tokens, n_decodes, decode_context, chunk_len, chunk_past, n_chunks, n_logits, pp, layers_per_stage
):
    """(latency, first-stage occupancy) of one batch, integer ns.

    cost: float64 rows [linear, allreduce, prefill_attention, send] by tokens, then a row of
    logits by sequences; scalars packed in cost[5, :5] = decode fixed, decode per token,
    draft tokens k, tokens per verify step E, the draft's cost per cached token; row 6 the
    draft model's step by decodes."""
    per_layer = _lookup(cost[0], tokens, 1.0) + _lookup(cost[1], tokens, 1.0)
    for j in range(n_chunks):
        # A chunk of c tokens after `past` cached ones does the attention pairs of a causal
        # prefill of c + past tokens less those of the past's own (c^2/2 + c past), at that
        # prefill's speed, and reads the past's keys and values at least as a decode does.
        # (Scaling the chunk's own time by 1 + 2 past / c multiplied a small chunk's fixed
        # kernel cost by thousands: a 4-token tail after 8188 tokens cost 200 ms.)
        c, past = chunk_len[j], chunk_past[j]
        whole = c + past
        share = (c * c + 2.0 * c * past) / (whole * whole)
        per_layer += max(_lookup(cost[2], whole, 2.0) * share, cost[5, 1] * past)
    if n_decodes > 0:
        per_layer += cost[5, 0] + cost[5, 1] * decode_context
    stage = layers_per_stage * per_layer
    logits = _lookup(cost[4], n_logits, 1.0) if n_logits > 0 else 0.0
    send = _lookup(cost[3], tokens, 1.0)
    draft = 0.0
    if n_decodes > 0 and cost[5, 2] > 0:  # the draft proposes k tokens for every decode first
        draft = cost[5, 2] * (_lookup(cost[6], n_decodes, 1.0) + cost[5, 4] * decode_context)
    latency = pp * stage + (pp - 1) * send + logits + draft
    occupancy = latency if pp == 1 else stage + send + logits + draft
    return np.int64(round(latency * 1e9)), np.int64(round(occupancy * 1e9))


@numba.njit(cache=True)
def _lookup(row, x, power):
    """row[x], or beyond the table its last entry scaled as x**power (GEMMs and sends grow
    linearly with tokens at that size, causal self-attention quadratically)."""
    last = len(row) - 1
    if x <= last:
        return row[x]
    return row[last] * (x / last) ** power


class EngineOutput(NamedTuple):
    """What `simulate_serving` returns: per request, then per replica, then totals."""

    first_ns: np.ndarray
    done_ns: np.ndarray
    replica: np.ndarray
    preemptions: np.ndarray
    gaps_ns: np.ndarray  # every gap between consecutive tokens, request by request
    iterations: np.ndarray
    batch_requests_sum: np.ndarray
    batch_tokens_sum: np.ndarray
    batch_tokens_max: np.ndarray
    busy_ns: np.ndarray  # first-stage occupancy
    block_ns: np.ndarray  # used KV blocks integrated over busy time
    peak_blocks: np.ndarray
    flops: float
    kv_read_tokens: float


@numba.njit(cache=True)
def simulate_serving(
    arrival_ns,
    prompt,
    output,
    cached,
    transfer_ns,
    replica_role,
    replica_traits,
    replica_cost_index,
    replica_pp,
    replica_layers,
    replica_max_requests,
    replica_max_tokens,
    replica_blocks,
    block_tokens,
    costs,
    router_start,
    router_balances,
    seed,
    flops_per_token,
    attention_flops_per_pair,
):  # pragma: no cover - compiled
    n = len(arrival_ns)
    n_rep = len(replica_role)
    max_pp = replica_pp.max()
    cap = replica_max_requests.max()
    # --- per request
    state = np.zeros(n, np.int64)
    replica_of = np.full(n, -1, np.int64)
    need = prompt - cached  # tokens to prefill this attempt (prompt, plus produced tokens after preemption)
    prefilled = np.zeros(n, np.int64)
    generated = np.zeros(n, np.int64)
    carry = np.zeros(n)  # running sum of the tokens speculative verify steps yield on average
    blocks = np.zeros(n, np.int64)
    in_flight = np.zeros(n, np.bool_)
    first_ns = np.full(n, -1, np.int64)
    done_ns = np.full(n, -1, np.int64)
    last_ns = np.zeros(n, np.int64)
    preemptions = np.zeros(n, np.int64)
    next_in_queue = np.full(n, -1, np.int64)
    gap_offset = np.zeros(n + 1, np.int64)
    for i in range(n):
        gap_offset[i + 1] = gap_offset[i] + output[i] - 1
    gaps = np.zeros(gap_offset[n], np.int64)
    # --- per replica
    head = np.full(n_rep, -1, np.int64)
    tail = np.full(n_rep, -1, np.int64)
    running = np.zeros((n_rep, cap * max_pp), np.int64)  # a batch cap per in-flight batch
    n_running = np.zeros(n_rep, np.int64)
    free_blocks = replica_blocks.copy()
    outstanding = np.zeros(n_rep, np.int64)
    batch_req = np.zeros((n_rep, max_pp, cap), np.int64)
    batch_tok = np.zeros((n_rep, max_pp, cap), np.int64)
    batch_len = np.zeros((n_rep, max_pp), np.int64)
    batch_end = np.full((n_rep, max_pp), NEVER, np.int64)
    stage_free = np.zeros(n_rep, np.int64)
    wake = np.full(n_rep, NEVER, np.int64)
    static_open = np.zeros(n_rep, np.bool_)  # a static batch is in progress
    # --- statistics
    iterations = np.zeros(n_rep, np.int64)
    batch_requests_sum = np.zeros(n_rep, np.int64)
    batch_tokens_sum = np.zeros(n_rep, np.int64)
    batch_tokens_max = np.zeros(n_rep, np.int64)
    busy_ns = np.zeros(n_rep, np.int64)
    block_ns = np.zeros(n_rep, np.float64)  # integral of used blocks over busy time
    peak_used = np.zeros(n_rep, np.int64)
    flops = 0.0
    kv_read_tokens = 0.0
    # --- routing pools
    n_pool0 = 0
    for r in range(n_rep):
        if replica_role[r] != ROLE_DECODE:
            n_pool0 += 1
    pool0 = np.empty(n_pool0, np.int64)
    pool1 = np.empty(n_rep - n_pool0, np.int64)
    a = b = 0
    for r in range(n_rep):
        if replica_role[r] != ROLE_DECODE:
            pool0[a] = r
            a += 1
        else:
            pool1[b] = r
            b += 1
    rr0 = np.zeros(1, np.int64)
    rr1 = np.zeros(1, np.int64)
    rng = np.array([np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) | np.uint64(1)], np.uint64)
    # transfers to the decode pool: a binary heap of (time, request)
    heap_t = np.empty(n, np.int64)
    heap_i = np.empty(n, np.int64)
    heap_n = 0
    chunk_len = np.empty(cap, np.int64)
    chunk_past = np.empty(cap, np.int64)

    next_arrival = 0
    finished = 0
    while finished < n:
        # ---- the next event
        t_batch = NEVER
        rb = -1
        sb = -1
        for r in range(n_rep):
            for s in range(replica_pp[r]):
                if batch_end[r, s] < t_batch:
                    t_batch, rb, sb = batch_end[r, s], r, s
        t_move = heap_t[0] if heap_n > 0 else NEVER
        t_arr = arrival_ns[next_arrival] if next_arrival < n else NEVER
        t_wake = NEVER
        rw = -1
        for r in range(n_rep):
            if wake[r] < t_wake:
                t_wake, rw = wake[r], r
        t = min(t_batch, t_move, t_arr, t_wake)
        if t == NEVER:
            raise RuntimeError("serving simulation stalled: requests can never be scheduled")
        if t_batch == t:
            r, s = rb, sb
            batch_end[r, s] = NEVER
            for j in range(batch_len[r, s]):
                i = batch_req[r, s, j]
                tok = batch_tok[r, s, j]
                in_flight[i] = False
                if state[i] == DONE:  # static padding
                    continue
                produced = False
                count = 1
                if prefilled[i] < need[i]:
                    prefilled[i] += tok
                    produced = prefilled[i] == need[i]
                else:
                    produced = True
                    yields = costs[replica_cost_index[r], 5, 3]
                    count = min(np.int64(np.floor(carry[i] + yields) - np.floor(carry[i])), output[i] - generated[i])
                    carry[i] += yields
                if produced:
                    for _ in range(count):
                        generated[i] += 1
                        if generated[i] == 1:
                            first_ns[i] = t
                        else:
                            gaps[gap_offset[i] + generated[i] - 2] = t - last_ns[i]
                        last_ns[i] = t
                    leaves = generated[i] == output[i]
                    if leaves:
                        state[i] = DONE
                        done_ns[i] = t
                        finished += 1
                    elif replica_role[r] == ROLE_PREFILL:
                        leaves = True
                        state[i] = MOVING
                        heap_n = _heap_push(heap_t, heap_i, heap_n, t + transfer_ns[i], i)
                    # a static batch keeps its finished requests as padding, not those sent on
                    if leaves and (state[i] == MOVING or not replica_traits[r, STATIC_BATCH]):
                        if state[i] != MOVING:  # a request being sent keeps its KV until it arrives
                            free_blocks[r] += blocks[i]
                            blocks[i] = 0
                            outstanding[r] -= 1
                        _remove_running(r, i, running, n_running)
            batch_len[r, s] = 0
            if replica_traits[r, STATIC_BATCH] and static_open[r]:
                over = True
                for q in range(n_running[r]):
                    if state[running[r, q]] != DONE:
                        over = False
                if over:
                    for q in range(n_running[r]):
                        i = running[r, q]
                        free_blocks[r] += blocks[i]
                        blocks[i] = 0
                        outstanding[r] -= 1
                    n_running[r] = 0
                    static_open[r] = False
            wake[r] = min(wake[r], t)
        elif t_move == t:
            i, heap_n = _heap_pop(heap_t, heap_i, heap_n)
            # the prefill replica frees the KV once it is sent
            src = replica_of[i]
            free_blocks[src] += blocks[i]
            blocks[i] = 0
            outstanding[src] -= 1
            wake[src] = min(wake[src], t)  # the source may now admit more
            r = _route(router_start, router_balances, pool1, outstanding, rr1, rng)
            _join(r, i, t, replica_of, state, outstanding, wake, head, tail, next_in_queue)
        elif t_arr == t:
            i = next_arrival
            next_arrival += 1
            r = _route(router_start, router_balances, pool0, outstanding, rr0, rng)
            _join(r, i, t, replica_of, state, outstanding, wake, head, tail, next_in_queue)
        if t_batch == t or t_move == t or t_arr == t:
            continue  # a replica schedules once every event of this instant is in (its wake)

        # ---- the woken replica starts a batch if its first stage is free
        r = rw
        wake[r] = NEVER
        if stage_free[r] > t:
            wake[r] = min(wake[r], stage_free[r])
            continue
        slot = -1
        for s in range(replica_pp[r]):
            if batch_len[r, s] == 0 and batch_end[r, s] == NEVER:
                slot = s
                break
        if slot < 0:
            continue
        paged, prio = replica_traits[r, PAGED], replica_traits[r, PREFILL_PRIORITY]
        mixed, budgeted = replica_traits[r, MIXED], replica_traits[r, TOKEN_BUDGET]
        chunked = replica_traits[r, CHUNKED_PREFILL]
        step = 1 + np.int64(costs[replica_cost_index[r], 5, 2])  # tokens a decode carries: 1 + draft tokens
        role = replica_role[r]
        bt = block_tokens
        nb = 0  # requests in the new batch
        tokens = 0
        n_dec = 0
        dec_ctx = 0
        n_ch = 0
        n_logits = 0
        budget = replica_max_tokens[r]
        per_batch = replica_max_requests[r]
        max_req = per_batch * replica_pp[r]  # requests admitted: a batch's worth per stage

        if replica_traits[r, STATIC_BATCH]:
            if not static_open[r]:
                # admit a new static batch
                while head[r] >= 0 and n_running[r] < per_batch:
                    i = head[r]
                    want = _blocks_for(prompt[i] + output[i], bt)
                    if want > free_blocks[r]:
                        break
                    _admit(r, want, head, tail, next_in_queue, free_blocks, blocks, state, running, n_running)
                if n_running[r] > 0:
                    static_open[r] = True
            if static_open[r]:
                for q in range(n_running[r]):
                    i = running[r, q]
                    if in_flight[i]:
                        continue
                    if prefilled[i] < need[i]:
                        c = need[i] - prefilled[i]
                        chunk_len[n_ch] = c
                        chunk_past[n_ch] = cached[i] + prefilled[i]
                        n_ch += 1
                        tok = c
                    else:
                        tok = step
                        n_dec += 1
                        dec_ctx += prompt[i] + generated[i]
                    batch_req[r, slot, nb] = i
                    batch_tok[r, slot, nb] = tok
                    nb += 1
                    tokens += tok
        else:
            # 1. running requests: decodes (all but a vLLM prefill iteration) and chunk continuations
            prefill_turn = False
            if prio and chunked and role != ROLE_DECODE:
                # SGLang runs a prompt's remaining chunks before any decode
                for q in range(n_running[r]):
                    i = running[r, q]
                    if not in_flight[i] and prefilled[i] < need[i]:
                        prefill_turn = True
                        break
            if prio and role != ROLE_DECODE and head[r] >= 0 and not prefill_turn:
                # vLLM prefers admitting prefills when the head of the queue fits (any chunk fits)
                i = head[r]
                want = _blocks_for(cached[i] + need[i], bt)
                if n_running[r] < max_req and (chunked or need[i] <= budget) and want <= free_blocks[r]:
                    prefill_turn = True
                elif n_running[r] == 0 and want <= free_blocks[r]:
                    prefill_turn = True  # an oversized prompt runs alone
            if not prefill_turn:
                q = 0
                while q < n_running[r]:
                    i = running[r, q]
                    if in_flight[i]:
                        q += 1
                        continue
                    if prefilled[i] < need[i]:
                        q += 1
                        continue  # chunk continuations come after the decodes
                    if nb >= per_batch or (chunked and mixed and nb >= budget):
                        break
                    if paged:
                        want = _blocks_for(prompt[i] + generated[i] + step - 1, bt)
                        preempted_self = False
                        while blocks[i] < want and free_blocks[r] == 0:
                            # preempt the most recently admitted request not in flight
                            victim = -1
                            for q2 in range(n_running[r] - 1, -1, -1):
                                cand = running[r, q2]
                                if not in_flight[cand] and not (cand != i and _in_batch(batch_req, r, slot, nb, cand)):
                                    victim = q2
                                    break
                            if victim < 0:
                                break
                            v = running[r, victim]
                            free_blocks[r] += blocks[v]
                            blocks[v] = 0
                            for q2 in range(victim, n_running[r] - 1):
                                running[r, q2] = running[r, q2 + 1]
                            n_running[r] -= 1
                            need[v] = prompt[v] - cached[v] + generated[v]
                            prefilled[v] = 0
                            preemptions[v] += 1
                            state[v] = WAITING
                            next_in_queue[v] = head[r]
                            head[r] = v
                            if tail[r] < 0:
                                tail[r] = v
                            if v == i:
                                preempted_self = True
                                break
                            if victim < q:
                                q -= 1
                        if preempted_self:
                            continue
                        if blocks[i] < want:
                            if free_blocks[r] == 0:
                                q += 1
                                continue
                            free_blocks[r] -= 1
                            blocks[i] += 1
                    batch_req[r, slot, nb] = i
                    batch_tok[r, slot, nb] = step
                    nb += 1
                    tokens += step
                    n_dec += 1
                    dec_ctx += prompt[i] + generated[i]
                    q += 1
            if (mixed and not prefill_turn) or (prefill_turn and chunked):
                # chunk continuations: beside the decodes (mixed), or leading a prefill iteration
                left = budget - tokens if budgeted else UNLIMITED
                for q in range(n_running[r]):
                    i = running[r, q]
                    if in_flight[i] or prefilled[i] >= need[i] or left <= 0 or nb >= per_batch:
                        continue
                    c = min(need[i] - prefilled[i], left)
                    chunk_len[n_ch] = c
                    chunk_past[n_ch] = cached[i] + prefilled[i]
                    n_ch += 1
                    batch_req[r, slot, nb] = i
                    batch_tok[r, slot, nb] = c
                    nb += 1
                    tokens += c
                    left -= c
            # 2. admissions
            if role != ROLE_DECODE and (prefill_turn or mixed):
                left = budget - tokens if budgeted else UNLIMITED
                while head[r] >= 0 and n_running[r] < max_req and left > 0 and nb < per_batch:
                    i = head[r]
                    if not paged:
                        want = _blocks_for(prompt[i] + output[i], bt)
                    else:
                        want = _blocks_for(cached[i] + need[i], bt)
                    if want > free_blocks[r]:
                        break
                    if not chunked and need[i] > left and nb > 0:
                        break
                    _admit(r, want, head, tail, next_in_queue, free_blocks, blocks, state, running, n_running)
                    c = min(need[i], left) if chunked else need[i]
                    chunk_len[n_ch] = c
                    chunk_past[n_ch] = cached[i]
                    n_ch += 1
                    batch_req[r, slot, nb] = i
                    batch_tok[r, slot, nb] = c
                    nb += 1
                    tokens += c
                    left -= c
            if role == ROLE_DECODE:
                # decode-only replicas admit arrivals whose cache fits, then decode them next time
                while head[r] >= 0 and n_running[r] < max_req and nb < per_batch:
                    i = head[r]
                    want = _blocks_for(prompt[i] + generated[i] + step - 1, bt)
                    if want > free_blocks[r]:
                        break
                    _admit(r, want, head, tail, next_in_queue, free_blocks, blocks, state, running, n_running)
                    prefilled[i] = need[i]
                    batch_req[r, slot, nb] = i
                    batch_tok[r, slot, nb] = step
                    nb += 1
                    tokens += step
                    n_dec += 1
                    dec_ctx += prompt[i] + generated[i]
        if nb == 0:
            continue
        for j in range(nb):
            i = batch_req[r, slot, j]
            in_flight[i] = True
            if prefilled[i] >= need[i]:  # a decode: logits for each token it carries
                n_logits += batch_tok[r, slot, j]
            elif prefilled[i] + batch_tok[r, slot, j] >= need[i]:  # a chunk ending the prompt
                n_logits += 1
        ci = replica_cost_index[r]
        latency, occupancy = _iteration_ns(
            costs[ci],
            tokens,
            n_dec,
            dec_ctx,
            chunk_len,
            chunk_past,
            n_ch,
            n_logits,
            replica_pp[r],
            replica_layers[r],
        )
        batch_len[r, slot] = nb
        batch_end[r, slot] = t + latency
        stage_free[r] = t + occupancy
        if replica_pp[r] > 1:
            wake[r] = min(wake[r], t + occupancy)
        used = replica_blocks[r] - free_blocks[r]
        peak_used[r] = max(peak_used[r], used)
        block_ns[r] += used * occupancy
        busy_ns[r] += occupancy
        iterations[r] += 1
        batch_requests_sum[r] += nb
        batch_tokens_sum[r] += tokens
        batch_tokens_max[r] = max(batch_tokens_max[r], tokens)
        pairs = float(dec_ctx)
        for j in range(n_ch):
            pairs += chunk_len[j] * (chunk_past[j] + (chunk_len[j] + 1) / 2.0)
        flops += flops_per_token * tokens + attention_flops_per_pair * pairs
        kv_read_tokens += dec_ctx
    return (
        first_ns,
        done_ns,
        replica_of,
        preemptions,
        gaps,
        iterations,
        batch_requests_sum,
        batch_tokens_sum,
        batch_tokens_max,
        busy_ns,
        block_ns,
        peak_used,
        flops,
        kv_read_tokens,
    )


@numba.njit(cache=True)
def _blocks_for(tokens, block_tokens):
    """KV blocks holding `tokens` tokens."""
    return (tokens + block_tokens - 1) // block_tokens


@numba.njit(cache=True)
def _join(r, i, t, replica_of, state, outstanding, wake, head, tail, next_in_queue):
    """Request i, routed to replica r at time t, joins the back of its queue and wakes it."""
    replica_of[i] = r
    state[i] = WAITING
    outstanding[r] += 1
    if tail[r] < 0:
        head[r] = i
    else:
        next_in_queue[tail[r]] = i
    tail[r] = i
    next_in_queue[i] = -1
    wake[r] = min(wake[r], t)


@numba.njit(cache=True)
def _admit(r, want, head, tail, next_in_queue, free_blocks, blocks, state, running, n_running):
    """The head of replica r's queue becomes a running request holding `want` KV blocks."""
    i = head[r]
    head[r] = next_in_queue[i]
    if head[r] < 0:
        tail[r] = -1
    free_blocks[r] -= want
    blocks[i] = want
    state[i] = RUNNING
    running[r, n_running[r]] = i
    n_running[r] += 1
    return i


@numba.njit(cache=True)
def _remove_running(r, i, running, n_running):
    """Request i leaves replica r's running list (the others keep their admission order)."""
    for q in range(n_running[r]):
        if running[r, q] == i:
            for q2 in range(q, n_running[r] - 1):
                running[r, q2] = running[r, q2 + 1]
            n_running[r] -= 1
            return


@numba.njit(cache=True)
def _in_batch(batch_req, r, slot, nb, i):
    """Whether request i is among the first nb of the batch being formed in slot."""
    for j in range(nb):
        if batch_req[r, slot, j] == i:
            return True
    return False


@numba.njit(cache=True)
def _heap_before(heap_t, heap_i, a, b):
    """Whether heap entry a comes before b: by time, then by request index."""
    return heap_t[a] < heap_t[b] or (heap_t[a] == heap_t[b] and heap_i[a] < heap_i[b])


@numba.njit(cache=True)
def _heap_push(heap_t, heap_i, heap_n, t, i):
    """Add (t, i) to the binary heap of heap_n entries; returns the new size."""
    k = heap_n
    heap_t[k] = t
    heap_i[k] = i
    while k > 0:
        parent = (k - 1) // 2
        if _heap_before(heap_t, heap_i, parent, k):
            break
        heap_t[parent], heap_t[k] = heap_t[k], heap_t[parent]
        heap_i[parent], heap_i[k] = heap_i[k], heap_i[parent]
        k = parent
    return heap_n + 1


@numba.njit(cache=True)
def _heap_pop(heap_t, heap_i, heap_n):
    """Remove the first entry of the heap of heap_n entries; returns (its request, the new size)."""
    i = heap_i[0]
    heap_n -= 1
    heap_t[0] = heap_t[heap_n]
    heap_i[0] = heap_i[heap_n]
    k = 0
    while True:
        child = 2 * k + 1
        if child >= heap_n:
            break
        if child + 1 < heap_n and _heap_before(heap_t, heap_i, child + 1, child):
            child += 1
        if _heap_before(heap_t, heap_i, k, child):
            break
        heap_t[k], heap_t[child] = heap_t[child], heap_t[k]
        heap_i[k], heap_i[child] = heap_i[child], heap_i[k]
        k = child
    return i, heap_n


@numba.njit(cache=True)
def _route(start, balances, pool_replicas, outstanding, rr_state, rng_state):
    """Index of the replica that takes the next request, among `pool_replicas`."""
    k = len(pool_replicas)
    if start == START_ROTATE:
        first = rr_state[0] % k
        rr_state[0] += 1
    elif start == START_RANDOM:  # xorshift64*, a seeded, platform-independent stream
        x = rng_state[0]
        x ^= x >> np.uint64(12)
        x ^= x << np.uint64(25)
        x ^= x >> np.uint64(27)
        rng_state[0] = x
        first = int((x * np.uint64(2685821657736338717)) >> np.uint64(33)) % k
    else:
        first = 0
    best = pool_replicas[first]
    if balances:
        for m in range(1, k):
            r = pool_replicas[(first + m) % k]
            if outstanding[r] < outstanding[best]:
                best = r
    return best
