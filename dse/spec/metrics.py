"""The metric vocabulary: one name per quantity, units in the name (../shared/DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass

from simulators._registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str
    better: str  # "minimize" or "maximize": the direction an objective takes by default
    meaning: str
    needs: str | None = None  # spec field that must be set for the metric to exist


TRAINING_METRICS: Registry[Metric] = Registry("training metric")
for _metric in (
    Metric("iteration_time_s", "minimize", "wall time of one optimizer step"),
    Metric("tokens_per_s", "maximize", "training tokens per second, whole job"),
    Metric("tokens_per_s_per_gpu", "maximize", "training tokens per second per GPU"),
    Metric("mfu", "maximize", "model FLOPs utilisation (0-1) against the dense peak of the precision"),
    Metric("hfu", "maximize", "hardware FLOPs utilisation (0-1), recomputation included"),
    Metric("memory_gib_per_gpu", "minimize", "peak per-GPU memory of the plan, GiB"),
    Metric("usd_per_hour", "minimize", "rental cost of the GPUs, $/hour"),
    Metric("usd_per_mtok", "minimize", "rental cost per million training tokens, $"),
    Metric("time_to_train_days", "minimize", "days to train on training.train_tokens", "training.train_tokens"),
    Metric("cost_to_train_usd", "minimize", "rental cost of training.train_tokens, $", "training.train_tokens"),
    Metric("capex_usd", "minimize", "purchase price of servers, NICs, switches and links, $", "cost.server_usd"),
    Metric("power_kw", "minimize", "IT power of the cluster while training (GPUs at TDP), kW", "cost.server_usd"),
    Metric("owned_usd_per_hour", "minimize", "owned cluster: amortised capex + energy, $/hour", "cost.server_usd"),
    Metric("owned_usd_per_mtok", "minimize", "owned cluster cost per million training tokens, $", "cost.server_usd"),
    Metric("kwh_per_mtok", "minimize", "facility energy (PUE included) per million tokens, kWh", "cost.server_usd"),
    Metric("co2e_kg_per_mtok", "minimize", "carbon per million tokens at the grid's intensity, kg", "cost.server_usd"),
    Metric(
        "owned_cost_to_train_usd", "minimize", "owned cluster cost of training.train_tokens, $", "training.train_tokens"
    ),
    Metric("co2e_kg_to_train", "minimize", "carbon of training.train_tokens, kg CO2e", "training.train_tokens"),
    # Failures and checkpoints (simulators/reliability, the spec's reliability: section).
    Metric("goodput_fraction", "maximize", "share of wall time spent on steps kept, failures and checkpoints counted"),
    Metric("interruptions_per_day", "minimize", "expected job interruptions a day, from the bill of materials"),
    Metric("checkpoint_every_s", "minimize", "training seconds between checkpoints (the knob, or Daly's optimum)"),
    Metric("checkpoint_gib", "minimize", "size of one checkpoint: bf16 weights and fp32 optimizer state, GiB"),
    Metric("checkpoint_blocking_s", "minimize", "seconds one checkpoint stops training"),
    Metric("restart_s", "minimize", "mean seconds from an interruption to training again"),
    Metric("spare_servers_chosen", "minimize", "hot spare servers beside the job (the knob; auto: the cheapest count)"),
    Metric("checkpoint_overhead_fraction", "minimize", "share of wall time writing checkpoints"),
    Metric("lost_work_fraction", "minimize", "share of wall time redoing steps lost to failures"),
    Metric("restart_fraction", "minimize", "share of wall time restarting after failures"),
    Metric(
        "time_to_train_days_with_failures",
        "minimize",
        "days to train on training.train_tokens, failures, restarts and checkpoints included",
        "training.train_tokens",
    ),
    Metric(
        "cost_to_train_usd_with_failures",
        "minimize",
        "rental cost of training.train_tokens with failures (spares rented too), $",
        "training.train_tokens",
    ),
    Metric(
        "owned_cost_to_train_usd_with_failures",
        "minimize",
        "owned cluster cost of training.train_tokens with failures (spares bought too), $",
        "training.train_tokens",
    ),
):
    TRAINING_METRICS.register(_metric.name, _metric)

LATENCIES = (
    ("ttft", "time to first token"),
    ("tbt", "time between consecutive token deliveries (a speculative step's tokens arrive as one)"),
    ("tpot", "time per output token after the first"),
    ("e2e", "end-to-end request latency"),
)
SERVING_METRICS: Registry[Metric] = Registry("inference metric")
for _metric in (
    *(
        Metric(f"{name}_p{p}_s", "minimize", f"{meaning}, {p}th percentile, s")
        for name, meaning in (*LATENCIES, ("normalized_latency", "end-to-end latency per output token"))
        for p in (50, 90, 99)
    ),
    *(
        Metric(f"{name}_p{p}_at_load_s", "minimize", f"{meaning}, {p}th percentile at serving.latency_load x capacity")
        for name, meaning in LATENCIES
        for p in (50, 90, 99)
    ),
    Metric("load_qps", "maximize", "the arrival rate of the *_at_load_s metrics: serving.latency_load x capacity"),
    Metric("throughput_tok_s", "maximize", "output tokens per second, whole deployment"),
    Metric("total_tok_s", "maximize", "prompt and output tokens per second"),
    Metric("requests_per_s", "maximize", "requests completed per second"),
    Metric("slo_attainment", "maximize", "share of requests within the TTFT and TPOT bounds"),
    Metric("goodput_rps", "maximize", "requests per second within the SLO"),
    Metric("capacity_qps", "maximize", "highest arrival rate meeting the SLO (capacity search)"),
    Metric("qps_per_usd_hour", "maximize", "capacity per rental $/hour (QPS/$)"),
    Metric("usd_per_hour", "minimize", "rental cost of the deployment's GPUs, $/hour"),
    Metric("usd_per_mtok", "minimize", "rental cost per million output tokens at the served rate, $"),
    Metric("num_gpus", "minimize", "GPUs of the deployment"),
    Metric(
        "capex_usd", "minimize", "purchase price of the deployment's servers, NICs and fabric, $", "cost.server_usd"
    ),
    Metric("power_kw", "minimize", "IT power of the deployment's servers and fabric, kW", "cost.server_usd"),
    Metric("owned_usd_per_hour", "minimize", "owned deployment: amortised capex + energy, $/hour", "cost.server_usd"),
    Metric(
        "owned_usd_per_mtok", "minimize", "owned cost per million output tokens at the served rate", "cost.server_usd"
    ),
    Metric("qps_per_owned_usd_hour", "maximize", "capacity per owned $/hour", "cost.server_usd"),
    Metric("kwh_per_mtok", "minimize", "facility energy per million output tokens, kWh", "cost.server_usd"),
    Metric("co2e_kg_per_mtok", "minimize", "carbon per million output tokens, kg CO2e", "cost.server_usd"),
    Metric("batch_size_mean", "maximize", "requests per iteration, mean"),
    Metric("kv_utilisation_mean", "maximize", "share of the KV cache in use while busy, mean"),
    Metric("kv_utilisation_peak", "minimize", "largest share of the KV cache in use"),
    Metric("preemptions", "minimize", "requests preempted (recomputed) over the run"),
    Metric("mfu", "maximize", "model FLOPs utilisation (0-1)"),
    Metric("mbu", "maximize", "HBM bandwidth utilisation by weight and KV reads (0-1)"),
):
    SERVING_METRICS.register(_metric.name, _metric)


DIRECTIONS = ("minimize", "maximize")
# Where a training run's wall time goes under failures: shares adding up to 1 (dse simulate and
# report.html show them).
GOODPUT_PARTS = (
    ("ideal steps", "goodput_fraction"),
    ("checkpoint overhead", "checkpoint_overhead_fraction"),
    ("lost work (steps redone)", "lost_work_fraction"),
    ("restarts", "restart_fraction"),
)
# Serving metrics of the capacity search: they exist where serving.qps is unset.
AT_LOAD_METRICS = tuple(name for name in SERVING_METRICS if name.endswith("_at_load_s")) + ("load_qps",)
CAPACITY_METRICS = ("capacity_qps", "qps_per_usd_hour", "qps_per_owned_usd_hour", *AT_LOAD_METRICS)
# Metrics of an owned cluster: they exist where the price book has a server price for the GPU.
OWNED_METRICS = (
    "capex_usd",
    "power_kw",
    "owned_usd_per_hour",
    "owned_usd_per_mtok",
    "kwh_per_mtok",
    "co2e_kg_per_mtok",
    "owned_cost_to_train_usd",
    "owned_cost_to_train_usd_with_failures",
    "co2e_kg_to_train",
    "qps_per_owned_usd_hour",
)
