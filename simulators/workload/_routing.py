"""How many routed tokens the busiest expert-parallel rank receives, relative to the mean.

Why: the all-to-all and the expert GEMMs of an MoE layer finish when the busiest rank of the
expert-parallel group finishes, and routing is not exactly even. Balanced routing at its best is
random routing: Megatron-Core's --moe-router-force-load-balancing (which NVIDIA's MoE benchmarks
use: "MoE benchmarks force-balance tokens across experts") replaces the router's logits with
random ones (megatron/core/transformer/moe/router.py, apply_random_logits), so each token picks
its top_k experts as a uniformly random k-subset of the E experts. A learned router with an
auxiliary balancing loss is no more even than that, so this is a lower bound for it.

Closed form. An expert-parallel group of `ep` ranks (E/ep experts each) routes N = ep * t tokens
(t per rank). The experts of one rank that a token picks follow a hypergeometric law (k draws
from E, E/ep of them the rank's): mean k/ep, variance k (1/ep)(1 - 1/ep)(E - k)/(E - 1). Over
N independent tokens a rank's load has mean t*k and variance N times that; the loads of the ep
ranks are near normal (N is thousands), so the busiest is at mean + z_ep * sd, with z_ep the
expected maximum of ep standard normals by Blom's approximation, Phi^-1((ep - 0.375)/(ep + 0.25))
(Blom 1958, "Statistical Estimates and Transformed Beta-Variables"; against the exact values,
1/sqrt(pi) for 2 and 3/(2 sqrt(pi)) for 3, it is 4 % and 2 % high, and closer for larger groups).
The loads are slightly negatively correlated (they sum to N*k), which this ignores.
At thousands of tokens per rank the excess is small: 1-3 %.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from simulators.models import ModelSpec
from simulators.workload._plan import ParallelPlan


def expected_max_standard_normal(n: int) -> float:
    """Blom's approximation of E[max of n independent standard normals] (0 for n = 1)."""
    if n == 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def busiest_rank_share(model: ModelSpec, plan: ParallelPlan) -> float:
    """Routed tokens of the busiest of the plan's ep ranks over the mean (1 without experts or ep)."""
    if not model.is_moe or plan.ep == 1:
        return 1.0
    experts, k, ep = model.moe_experts, model.moe_top_k, plan.ep
    tokens = plan.micro_batch * (plan.seq_len // plan.cp) // plan.tp  # routed by each rank
    per_token_var = k * (1 / ep) * (1 - 1 / ep) * (experts - k) / (experts - 1)
    sd = math.sqrt(ep * tokens * per_token_var)
    return 1.0 + expected_max_standard_normal(ep) * sd / (tokens * k)
