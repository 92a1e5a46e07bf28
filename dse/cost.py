"""Running cost of a candidate: rental $/hour and what a token or a whole run costs."""

from __future__ import annotations

from collections.abc import Mapping


def training_cost_metrics(
    metrics: Mapping[str, float],
    num_gpus: int,
    usd_per_gpu_hour: float,
    train_tokens: float | None,
) -> dict[str, float]:
    """Cost metrics from a training result's throughput (`tokens_per_s`)."""
    usd_per_hour = num_gpus * usd_per_gpu_hour
    tokens_per_hour = metrics["tokens_per_s"] * 3600.0
    out = {"usd_per_hour": usd_per_hour, "usd_per_mtok": usd_per_hour / tokens_per_hour * 1e6}
    if train_tokens is not None:
        hours = train_tokens / tokens_per_hour
        out["time_to_train_days"] = hours / 24.0
        out["cost_to_train_usd"] = hours * usd_per_hour
    return out
