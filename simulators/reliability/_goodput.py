"""Checkpoint intervals and the expected wall time of a job under exponential failures.

With work T_s between failures of mean M (s), a checkpoint every tau seconds of work costing
delta, and a restart R (all s), Daly's model (J. T. Daly, "A higher order estimate of the optimum
checkpoint interval for restart dumps", Future Generation Computer Systems 22, 2006) gives the
expected wall time T_w = M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau, failures striking during
restarts and checkpoints too. Young's interval (J. W. Young, CACM 17, 1974) is sqrt(2 delta M);
Daly's higher-order one is sqrt(2 delta M) [1 + sqrt(delta/(2M))/3 + delta/(18 M)] - delta for
delta < 2M, else M.

The wall time splits into the work itself, checkpoints (T_s / tau of them, delta each), restarts
(T_w / M interruptions, each restart lasting min(R, time to the next failure), a share
1 - e^{-R/M} of the wall time) and the rest, which is work lost: done since the last checkpoint
and done again. A checkpoint is taken between steps: the interval is a whole number of steps.
Work already written is lost too where a failure strikes while a background write is still
running: `lag_s` (the background write) is added to R in the formula and counted as lost work.
Hot spares: a server-replacing failure waits `no_spare_wait_s` unless one of `spares` is free;
servers in repair are Poisson with mean (server failures a second x repair time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    if checkpoint_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = checkpoint_s / (2.0 * mtbf_s)
    return young_interval_s(checkpoint_s, mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - checkpoint_s


def wall_per_work(interval_s: float, checkpoint_s: float, restart_s: float, mtbf_s: float) -> float:
    """Daly's T_w / T_s, computed in logs so that long restarts do not overflow."""
    log = restart_s / mtbf_s + math.log(mtbf_s * math.expm1((interval_s + checkpoint_s) / mtbf_s) / interval_s)
    return math.exp(min(log, 700.0))


def spare_free_probability(spares: int, mean_in_repair: float) -> float:
    """P(fewer than `spares` servers are in repair) for a Poisson count of mean `mean_in_repair`."""
    term, total = math.exp(-mean_in_repair), 0.0
    for k in range(spares):
        total += term
        term *= mean_in_repair / (k + 1)
    return min(total, 1.0)


@dataclass(frozen=True)
class Goodput:
    """Shares of the job's wall time (they add up to 1) and the interval used."""

    interval_s: float
    restart_s: float
    ideal: float  # the goodput fraction: useful steps
    checkpoint: float
    lost_work: float
    restarts: float


def goodput(
    mtbf_s: float,
    checkpoint_s: float,
    restart_s: float,
    lag_s: float = 0.0,
    interval_s: float | None = None,
    step_s: float | None = None,
    planned_per_s: float = 0.0,
    planned_restart_s: float = 0.0,
) -> Goodput:
    """The breakdown for one job: `checkpoint_s` blocks training each checkpoint, `restart_s`
    follows each interruption, `lag_s` is a background write's duration (the interval is at least
    that); `interval_s` None: Daly's higher-order optimum; `step_s`: the step time the interval is
    rounded to (at least one step), None: not rounded. Planned stops (`planned_per_s`, each
    costing `planned_restart_s` and no work) take a share planned_per_s x planned_restart_s of
    the wall time, the rest shrinking in proportion."""
    tau = daly_interval_s(checkpoint_s, mtbf_s) if interval_s is None else interval_s
    if step_s is not None:
        tau = max(1, round(tau / step_s), math.ceil(lag_s / step_s)) * step_s
    tau = max(tau, lag_s)
    ratio = wall_per_work(tau, checkpoint_s, restart_s + lag_s, mtbf_s)
    checkpoints = checkpoint_s / tau / ratio
    restarts = min(-math.expm1(-restart_s / mtbf_s), 1.0 - 1.0 / ratio - checkpoints)
    lost = 1.0 - 1.0 / ratio - checkpoints - restarts
    planned = planned_per_s * planned_restart_s
    if planned >= 1.0:
        raise ValueError(f"planned stops take {planned:.3g} of the wall time: no time trains")
    keep = 1.0 - planned
    return Goodput(tau, restart_s, keep / ratio, keep * checkpoints, keep * lost, keep * restarts + planned)
