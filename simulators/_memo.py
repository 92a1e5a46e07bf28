"""Bounds on the training model's memo tables, so a long search holds memory, not every plan.

Why: the tables keyed by plan (peak memory, a plan's normalised forms, its stages) gained about
4.5 KB per distinct plan and never let go: an exhaustive study of 10^7 plans would hold tens of
GiB in each evaluating process, on a machine other jobs share. A search meets the same shapes
again mostly within a short span (a batch, the neighbourhood a sampler explores), so the oldest
entries are the ones to drop. Every table is a pure memo: dropping an entry only means pricing
that key again, with the same answer.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import islice

# Entries each memo table keeps: 2^16 holds llama70b.yaml's whole grid (16,620 plans) with room,
# and bounds a process's memo memory near 300 MiB (4.5 KB per plan over all tables).
MEMO_ENTRIES = 1 << 16

plan_memo = lru_cache(maxsize=MEMO_ENTRIES)  # for functions of one plan, used as a decorator


def trim(table: dict) -> None:
    """Drop the oldest entries of `table` (dicts keep insertion order) until MEMO_ENTRIES remain.
    Called before a batch inserts, never during one: a batch reads back what it just stored."""
    excess = len(table) - MEMO_ENTRIES
    if excess > 0:
        for key in list(islice(table, excess)):
            del table[key]


_INTERNED: dict = {}


def interned(value):
    """The one instance of `value` kept here: normalised plans built from many different plans
    are equal but distinct objects, and every memo lookup keyed by them compared them field by
    field (a tenth of a fresh plan's evaluation); with one shared instance those lookups are an
    identity check. Bounded like the memo tables (a dropped instance only costs sharing)."""
    if len(_INTERNED) > MEMO_ENTRIES:
        trim(_INTERNED)
    return _INTERNED.setdefault(value, value)
