"""Accuracy of the analytical training model against published training measurements.

Why: before the search trusts `simulate_training`, we need to know how far it is from real runs,
and whether it orders plans of one model as the measurements do. This replays every row of
../shared/validation/training.csv and of the ranking file ../shared/validation/ranking/ (see their
READMEs) through the model, converts the prediction to the row's metric (step time, tokens/s per
GPU, TFLOP/s per GPU in the row's FLOP convention, or MFU against the README's peaks) and reports
the signed error (predicted / measured - 1) per row, overall and per source. A row that names a
zoo model takes the architecture fields it leaves blank from the zoo; a row that does not state
its micro-batch (or, given the model-parallel size, its tp/pp split) is evaluated at the fastest
plan that fits in memory; each such fill is listed among the row's assumptions. For files with
many plans per model it prints the Spearman rank correlation of predicted and measured values per
model. The output ends with `ranking: min Spearman <x> over <m> models` and, last,
`MAPE <x>% over <n> rows` over the training.csv rows. Rows the model cannot represent are listed
with the reason.

    python benchmarks/accuracy_training.py [--data PATH ...] [--out results.csv]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from simulators import DseError
from simulators.analytical import simulate_training_batch
from simulators.hardware import get_gpu, sustained_compute_fraction
from simulators.models import ModelSpec, get_model
from simulators.network import Network
from simulators.workload import ParallelPlan, TrainingCandidate, TrainingSystem, logits_gemm, model_flops


def _validation_dir() -> Path:
    """../shared/validation beside the checkout (or beside the folder that holds it)."""
    root = Path(__file__).resolve().parents[1]
    for base in (root.parent, root.parent.parent):
        if (base / "shared" / "validation").is_dir():
            return base / "shared" / "validation"
    return root.parent / "shared" / "validation"


VALIDATION = _validation_dir()
DEFAULT_CSV = VALIDATION / "training.csv"
RANKING_CSV = VALIDATION / "ranking" / "vtrain_single_node.csv"
ARCH_FIELDS = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")
MOE_FIELDS = {"moe_experts": "moe_experts", "moe_topk": "moe_top_k", "moe_ffn_hidden": "moe_ffn_hidden"}
PARALLEL_FIELDS = ("tp", "pp", "dp", "micro_batch")
BOOLS = {"true": True, "false": False, "": None}
# Megatron-Bridge rows name the recipe's --recompute-modules in their notes: "recompute_modules ['mlp']".
# Megatron-Bridge's DeepSeek-V3 layouts by (pp, vpp), as transformer layers per virtual stage
# (src/megatron/bridge/recipes/deepseek/deepseek_v3.py set_deepseek_v3_pipeline_model_parallel_layout
# at v0.4.0: the embedding on the first virtual stage, the MTP layer and the loss on the last;
# dse does not model the MTP layer).
_DSV3_BY_4 = (4,) * 15 + (1,)
_DSV3_BY_8 = (8,) * 7 + (5,)
RECIPE_LAYOUTS = {
    ("DeepSeek-V3", 4, 1): (16, 16, 16, 13),
    ("DeepSeek-V3", 8, 1): _DSV3_BY_8,
    ("DeepSeek-V3", 4, 2): _DSV3_BY_8,
    ("DeepSeek-V3", 16, 1): _DSV3_BY_4,
    ("DeepSeek-V3", 8, 2): _DSV3_BY_4,
    ("DeepSeek-V3", 4, 4): _DSV3_BY_4,
}
BF16_GRADIENT_SOURCES = ("megatron_bridge", "nemo_24.07", "nemo_25.")
# Transformer Engine's tensor-parallel overlap (Megatron's --tp-comm-overlap), on only where a
# recipe's own configuration says so: the row's notes ("TP comm overlap" / "... off", quoting
# Megatron-Bridge's configs); MLPerf Training v3.0 GPT-3 (the submissions' config_DGXH100_*.sh
# export TP_COMM_OVERLAP=True; read in the aws-samples/awsome-distributed-training copy,
# 3.test_cases/mlperf/gpt3/config_DGXH100_64x8x192x4x8_mbs1.sh); NeMo 24.07's runs as the
# NeMo-Framework-Launcher configs of that release set `ub_tp_comm_overlap` (launcher_scripts/conf/
# training/*, git history read at 1a7171d7, 2024-07-17: the commit two days after "Change VP size
# of GPT3" set the summary's vpp 6, and before 2024-08-02 moved Llama-2-70B from the summary's
# vpp 20 to 5): True for llama/llama2_70b, llama/llama3_70b, nemotron/nemotron_8b and _22b and
# gpt3/20b; False for gpt3/175b (True only in its 2023 versions) and nemotron/nemotron_340b;
# tp 1 elsewhere. NeMo 2.0's (25.x) Llama-3.1-405B and Nemotron-4-340B, whose B200 userbuffers
# configurations the recipes load (nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:
# userbuffers_*_b200_h16384_tp4_cp2_*, userbuffers_bf16_b200_h18432_tp8_*; Mixtral has none).
# Sources before userbuffers (2023) could not run it.
TP_OVERLAP_CONFIGS = (
    ("mlperf_training_v3.0", "GPT-3-175B"),
    ("nemo_24.07", "GPT3-20B"),
    ("nemo_24.07", "Llama-2-70B"),
    ("nemo_24.07", "Llama-3-70B"),
    ("nemo_24.07", "Nemotron-8B"),
    ("nemo_24.07", "Nemotron-22B"),
    ("nemo_25.", "Llama-3.1-405B"),
    ("nemo_25.", "Nemotron-4-340B"),
)
# the notes' words for it, or Megatron-LM's flag where a row quotes the command line
TP_OVERLAP_NOTE = re.compile(r"TP comm overlap( off)?|--tp-comm-overlap")
RECOMPUTE_MODULES_NOTE = re.compile(r"recompute_modules \[([^\]]*)\]")
# The rows' model names -> zoo entries (simulators/models/models.yaml), matched by name only.
ZOO_NAMES = {
    "Llama-2-7B": "llama2-7b",
    "Llama-2-13B": "llama2-13b",
    "Llama-2-70B": "llama2-70b",
    "Llama-3-8B": "llama3-8b",
    "Llama-3-70B": "llama3-70b",
    "Llama-3.1-405B": "llama3-405b",
    "GPT-3-175B": "gpt3-175b",
    "GPT3-175B": "gpt3-175b",
    "Mixtral-8x7B": "mixtral-8x7b",
    "Mixtral-8x22B": "mixtral-8x22b",
    "DeepSeek-V3": "deepseek-v3",
    "Nemotron-4-340B": "nemotron4-340b",
    "Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen3-235B-A22B": "qwen3-235b-a22b",
    "GPT-OSS-120B": "gpt-oss-120b",
}
# Plans searched for a field the row leaves blank: Megatron's tensor-parallel degrees within a
# node and power-of-two micro-batches.
TP_OPTIONS = (1, 2, 4, 8)
MICRO_BATCH_OPTIONS = (1, 2, 4, 8, 16, 32)
# Megatron-LM gained the interleaved schedule with the SC'21 paper's code (April 2021): the
# README runs before it could not interleave.
BEFORE_INTERLEAVING = ("megatron_readme_sep2020", "megatron_readme_jan2021")
RANKING_MIN_ROWS = 10  # a file "has many plans per model" when its models average this many rows
# Dense FP16/BF16 peaks of the README's "Peak throughput used for MFU" table, TFLOP/s.
README_PEAK_TFLOPS = {
    "V100-32GB": 125,
    "A100-40GB": 312,
    "A100-80GB": 312,
    "H100-SXM": 989,
    "H800": 989,
    "H200": 989,
    "B200": 2250,
    "GB200": 2500,
}


class Skip(Exception):
    """The row cannot be represented by the model; the message is the grouped reason."""


@dataclass(frozen=True)
class Outcome:
    row: dict[str, str]
    predicted: float
    memory: str  # "fits", or "OOM <needed>/<capacity> GiB"
    assumptions: tuple[str, ...]

    @property
    def measured(self) -> float:
        return float(self.row["value"])

    @property
    def error_pct(self) -> float:
        return (self.predicted / self.measured - 1) * 100


def _int(row: dict[str, str], column: str) -> int | None:
    return int(float(row[column])) if row.get(column) else None


def _stated_shape(row: dict[str, str]) -> dict[str, int]:
    """The architecture fields the row fills, under ModelSpec's names."""
    stated = {c: _int(row, c) for c in ARCH_FIELDS if row[c]}
    stated.update({name: _int(row, c) for c, name in MOE_FIELDS.items() if row[c]})
    return stated


def model_and_assumptions(row: dict[str, str]) -> tuple[ModelSpec, list[str]]:
    """The row's model: its stated fields over the zoo entry it names (each field taken from the
    zoo is an assumption), or, for a model the zoo lacks, the stated fields alone."""
    stated = _stated_shape(row)
    zoo_name = ZOO_NAMES.get(row["model"])
    try:
        if zoo_name:
            zoo = get_model(zoo_name)
            fields = {**zoo.model_dump(), **stated, "name": row["model"], "params_b": None, "active_params_b": None}
            filled = [f"{c} from the zoo ({zoo_name})" for c in ARCH_FIELDS if not row[c]]
            return ModelSpec(**fields), filled
        missing = [c for c in ARCH_FIELDS if not row[c]]
        if missing:
            raise Skip(f"architecture not stated: {', '.join(missing)}")
        hidden, heads = stated["hidden"], stated["heads"]
        if hidden % heads:
            raise Skip("hidden not a multiple of heads and head_dim not stated")
        return (
            ModelSpec(
                name=row["model"],
                **stated,
                head_dim=hidden // heads,
                # GPT (GeLU) uses a non-gated 2-matrix MLP; models with gated MLPs are in the zoo.
                gated_mlp=False,
                tied_embeddings=False,
            ),
            [],
        )
    except ValidationError as exc:
        raise Skip(f"invalid model shape: {exc.errors()[0]['msg']}") from None


def build_model(row: dict[str, str]) -> ModelSpec:
    return model_and_assumptions(row)[0]


def build_plan(
    row: dict[str, str],
    micro_batch: int | None = None,
    tp: int | None = None,
    pp: int | None = None,
    vpp: int | None = None,
) -> tuple[ParallelPlan, list[str]]:
    """The row's plan, and the assumptions made for fields the source does not state;
    `micro_batch`, `tp`, `pp` and `vpp` stand in for blank fields (see `plan_options`)."""
    tp, pp = _int(row, "tp") or tp, _int(row, "pp") or pp
    micro_batch = _int(row, "micro_batch") or micro_batch
    missing = [c for c, v in zip(PARALLEL_FIELDS, (tp, pp, _int(row, "dp"), micro_batch)) if v is None]
    if missing:
        raise Skip(f"not stated: {'/'.join(missing)}")
    dp, cp = _int(row, "dp"), _int(row, "cp") or 1
    if tp * pp * dp * cp != int(row["num_gpus"]):
        raise Skip("tp*pp*dp*cp differs from num_gpus")
    assumptions = []
    recompute, precision = row["recompute"], row["precision"]
    if not recompute:
        if precision not in ("bf16", "fp8"):
            raise Skip("recompute not stated (fp16-era row)")
        recompute = "none"
        assumptions.append("recompute not stated; assumed none")
    modules = RECOMPUTE_MODULES_NOTE.search(row["notes"]) if recompute == "selective" else None
    recompute_modules = ("core_attn",)  # Megatron's default
    if modules:
        recompute_modules = tuple(re.findall(r"'(\w+)'", modules.group(1)))
        assumptions.append(f"recompute modules from the notes' recipe config: {', '.join(recompute_modules)}")
    sequence_parallel = BOOLS[row["seq_parallel"]]
    if sequence_parallel is None:
        sequence_parallel = tp > 1
        assumptions.append("seq_parallel not stated; assumed tp > 1")
    distributed_optimizer = BOOLS[row["dist_optimizer"]]
    if distributed_optimizer is None:
        distributed_optimizer = True
        assumptions.append("dist_optimizer not stated; assumed true")
    if (_int(row, "ep") or 1) > 1:
        assumptions.append("ep given; experts spread over dp*cp ranks")
    if not row["vpp"] and vpp is None:
        assumptions.append("vpp not stated; assumed 1")
    # DeepSpeed of the time put data-parallel traffic on the critical path: its `overlap_comm`
    # defaults to false (deepspeed.ai/docs/config-json), and ZeRO-3's parameter all-gather
    # synchronised the device before each gather (DeepSpeed PR #1188, June 2021: "the async
    # version is not async at all, because each all_gather calls torch.cuda.synchronize()").
    deepspeed = "DeepSpeed" in row["notes"]
    early = any(year in row["source"] for year in ("2019", "2020", "2021"))
    pipeline_split, layout = "even", None
    layers, chunks = _int(row, "layers"), pp * (_int(row, "vpp") or vpp or 1)
    if (row["model"], pp, chunks // pp) in RECIPE_LAYOUTS:
        layout = RECIPE_LAYOUTS[row["model"], pp, chunks // pp]
        assumptions.append("pipeline layout of the Megatron-Bridge recipe")
    elif layers and chunks > 1 and layers % chunks and (layers + 2) % chunks == 0:
        # NVIDIA's recipes for such models (NeMo's Llama-3.1-405B, Megatron-Bridge's Qwen3-235B)
        # count the embedding and the loss as pipeline layers: the only even split Megatron accepts.
        pipeline_split = "embedding+loss"
        assumptions.append("pp*vpp divides layers+2 only; embedding and loss counted as pipeline layers")
    # NVIDIA's performance recipes reduce gradients in bf16: Megatron-Bridge's (scripts/performance/
    # configs/<model>/*_llm_pretrain.py at v0.4.0 and v0.5.0: cfg.ddp.grad_reduce_in_fp32 = False)
    # and NeMo 24.07's launcher configs (NeMo-Framework-Launcher launcher_scripts/conf/training/
    # nemotron/nemotron_340b.yaml: optim.grad_sync_dtype bf16; its H100 examples pass
    # +training.model.optim.grad_sync_dtype=bf16) and NeMo 2.0's (25.x) performance scripts for fp8
    # runs (NVIDIA/NeMo scripts/performance/llm/pretrain_gpt3_175b.py and pretrain_mixtral_8x22b.py:
    # bf16_with_fp8_mixed() with grad_reduce_in_fp32 = False; every NeMo 25.x row is fp8).
    bf16_grads = row["source"].startswith(BF16_GRADIENT_SOURCES)
    if bf16_grads:
        assumptions.append("NVIDIA performance recipe: gradients reduced in bf16")
    # Kernels replayed from CUDA graphs never wait for the host: Megatron-Bridge's "full-iteration
    # CUDA graph" and NeMo's cuda_graphs 1 (every transformer layer graphed), as the notes quote
    # the recipe configs; graphs of some modules only (attention, router) leave the experts'
    # kernels to the host, so they count as none.
    cuda_graphs = any(phrase in row["notes"] for phrase in ("full-iteration CUDA graph", "cuda_graphs 1"))
    if cuda_graphs:
        assumptions.append("CUDA graphs from the notes' recipe config: no kernel waits for the host")
    tp_comm_overlap = False
    if sequence_parallel and tp > 1:
        stated = TP_OVERLAP_NOTE.search(row["notes"])
        configured = any(row["source"].startswith(s) and row["model"] == m for s, m in TP_OVERLAP_CONFIGS)
        tp_comm_overlap = not stated.group(1) if stated else configured
        if stated or configured:
            where = "the notes quote the recipe" if stated else "the recipe's config sets it"
            assumptions.append(f"TP comm overlap {'on' if tp_comm_overlap else 'off'}, as {where}")
    # Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm) and a fused grouped
    # expert kernel, where the notes quote the recipe config saying so ("MoE all-to-all overlap",
    # "fused grouped MLP"); otherwise the all-to-alls are exposed and Transformer Engine's
    # GroupedLinear issues one GEMM per expert.
    moe_a2a_overlap = "all-to-all overlap" in row["notes"] and (_int(row, "ep") or 1) > 1
    if moe_a2a_overlap:
        assumptions.append("MoE all-to-all overlap (combined 1F1B), as the notes quote the recipe")
    fused_experts = "fused grouped MLP" in row["notes"]
    if fused_experts:
        assumptions.append("experts in one fused grouped kernel, as the notes quote the recipe")
    # `dp_overlap` (ranking files): false where the framework did not bucket the gradients, so
    # their all-reduce follows the backward pass.
    dp_overlap = BOOLS[row.get("dp_overlap", "")]
    plan = ParallelPlan(
        tp=tp,
        pp=pp,
        dp=dp,
        micro_batch=micro_batch,
        global_batch=int(row["global_batch"]),
        seq_len=int(row["seq_len"]),
        cp=cp,
        ep=_int(row, "ep") or 1,
        vpp=_int(row, "vpp") or vpp or 1,
        recompute=recompute,
        recompute_modules=recompute_modules,
        sequence_parallel=sequence_parallel,
        zero_stage=(3 if "ZeRO-3" in row["notes"] else 1) if distributed_optimizer else 0,
        # FlashAttention appeared in 2022: runs published before it computed attention unfused,
        # with Megatron's GPT defaults of the time (hidden and attention dropout 0.1).
        flash_attention=not early,
        dropout=early,
        precision=precision,
        overlap_grad_reduce=not deepspeed if dp_overlap is None else dp_overlap,
        overlap_param_gather=not deepspeed,
        pipeline_split=pipeline_split,
        pipeline_layout=layout,
        grad_reduce_in_bf16=bf16_grads,
        cuda_graphs=cuda_graphs,
        tp_comm_overlap=tp_comm_overlap,
        moe_a2a_overlap=moe_a2a_overlap,
        moe_grouped_gemm="fused" if fused_experts else "multi_stream",
    )
    return plan, assumptions


def plan_options(row: dict[str, str], model: ModelSpec) -> list[tuple[ParallelPlan, list[str]]]:
    """Every plan the row allows: the stated one, or, where it leaves the micro-batch (or, with
    dp given, the tp/pp split of the model-parallel size) blank, each candidate for it; a row
    that leaves the interleaving blank as well is also tried at each chunk count Megatron accepts
    (layers divisible by pp * vpp): tuned runs of the time interleaved where it helped."""
    blank_mb, blank_split = not row["micro_batch"], not row["tp"] and not row["pp"] and bool(row["dp"])
    if not blank_mb and not blank_split:
        return [build_plan(row)]
    # every chunk count; those that do not divide the layers are dropped below
    vpps = range(1, model.layers + 1) if not row["vpp"] and row["source"] not in BEFORE_INTERLEAVING else (None,)
    dp, cp = _int(row, "dp"), _int(row, "cp") or 1
    per_rank = int(row["global_batch"]) // dp if dp else 0
    mbs = [m for m in MICRO_BATCH_OPTIONS if per_rank and per_rank % m == 0] if blank_mb else [None]
    model_parallel = int(row["num_gpus"]) // ((dp or 1) * cp)
    splits = [(None, None)]
    if blank_split:
        splits = [(t, model_parallel // t) for t in TP_OPTIONS if model_parallel % t == 0]
        splits = [(t, p) for t, p in splits if model.layers % p == 0 and model.heads % t == 0]
    if not mbs or not splits:
        return [build_plan(row)]  # raises Skip naming what is not stated
    options = []
    for mb, (tp, pp), vpp in itertools.product(mbs, splits, vpps):
        stages = pp or _int(row, "pp")
        if vpp is not None and (vpp > 1 and stages == 1 or model.layers % (stages * vpp)):
            continue
        try:
            plan, assumptions = build_plan(row, micro_batch=mb, tp=tp, pp=pp, vpp=vpp)
        except DseError:
            continue
        if vpp is not None:
            assumptions.append("vpp not stated; the fastest that fits in memory")
        if blank_mb:
            assumptions.append("micro_batch not stated; the fastest that fits in memory")
        if blank_split:
            assumptions.append("tp/pp not stated; the fastest split of tp*pp that fits in memory")
        options.append((plan, assumptions))
    if not options:
        raise Skip("no plan of the unstated fields is valid")
    return options


def step_flops(model: ModelSpec, plan: ParallelPlan, convention: str) -> float:
    """FLOPs of one step per the README's conventions; `hardware` adds the recomputed forward
    of the transformer layers (not of the logit layer): F_hw = F_model + (F_model - 6Bshv) / 3."""
    flops = model_flops(model, plan.global_batch, plan.seq_len)
    if convention == "hardware" and plan.recompute == "full":
        logits = 3 * logits_gemm(model, plan.global_batch, plan.seq_len, tp=1).flops
        flops += (flops - logits) / 3
    return flops


def row_network(row: dict[str, str], gpu) -> Network:
    """The GPU's reference network with the row's NVLink domain and NIC bandwidth where stated."""
    network = Network.from_gpu(gpu)
    changes = {}
    if row["gpus_per_node"]:
        changes["domain_gpus"] = int(row["gpus_per_node"])
    if row["nic_gbps_per_gpu"]:
        changes["nic_gbytes_per_s"] = float(row["nic_gbps_per_gpu"]) / 8
    return dataclasses.replace(network, **changes) if changes else network


_NETWORKS: dict[tuple, Network] = {}


def publisher_flops_per_token(row: dict[str, str], rows_by_id: dict[str, dict[str, str]] | None) -> float | None:
    """The publisher's model FLOPs per token for a TFLOP/s row whose run also has a tokens/s
    row (the `-b` sibling): TFLOP/s / tokens/s, both read from the source.

    Why: the publishers do not share one FLOP count. The NeMo 24.07-25.04 rows follow the
    README's general formula (full s x s attention scores) to 0.1 %, while Megatron-Bridge
    26.x (and NeMo 25.02's Mixtral-8x22B) count only the causal half, s/(2h): the pair ratio
    matches that to 0.1 % for Qwen3 and Llama-3.1 rows; GPT-OSS also drops the sliding-window
    layers' scores and DeepSeek-V3 uses Megatron's MLA count. Taking the ratio from the
    pair follows each publisher exactly, with no formula guessed."""
    sibling = (rows_by_id or {}).get(row["id"] + "-b")
    if row["metric"] != "tflops_per_gpu" or not sibling or sibling["metric"] != "tokens_per_s_per_gpu":
        return None
    return float(row["value"]) * 1e12 / float(sibling["value"])


def evaluate(
    row: dict[str, str],
    compute_fraction: float | None = None,
    host_launch_s: float | None = None,
    rows_by_id: dict[str, dict[str, str]] | None = None,
) -> Outcome:
    """The row predicted with `compute_fraction` and `host_launch_s` (default: the fitted ones
    users get); a row with unstated plan fields at its fastest option that fits in memory.
    `rows_by_id` (the row's file) lets a TFLOP/s row use its publisher's FLOP count."""
    model, assumed = model_and_assumptions(row)
    options = plan_options(row, model)
    gpu, num_gpus = get_gpu(row["gpu"]), int(row["num_gpus"])
    key = (gpu.name, row["gpus_per_node"], row["nic_gbps_per_gpu"])
    if key not in _NETWORKS:
        _NETWORKS[key] = row_network(row, gpu)
    fraction = sustained_compute_fraction(gpu) if compute_fraction is None else compute_fraction
    system = TrainingSystem(
        gpu,
        num_gpus,
        memory_reserve_gib=0.0,
        compute_fraction=fraction,
        network=_NETWORKS[key],
        host_launch_s=host_launch_s,
    )
    candidates = [TrainingCandidate(model, system, plan) for plan, _ in options]
    results = simulate_training_batch(candidates, breakdown=False)
    fitting = [i for i, r in enumerate(results) if r.feasible] or range(len(results))
    best = min(fitting, key=lambda i: results[i].metrics["iteration_time_s"])
    plan, result = options[best][0], results[best]
    time_s = result.metrics["iteration_time_s"]
    per_token = publisher_flops_per_token(row, rows_by_id)
    if per_token is not None:
        assumed.append("TFLOP/s from tokens/s with the publisher's FLOPs per token (its tokens/s row)")
        tflops = result.metrics["tokens_per_s_per_gpu"] * per_token / 1e12
    else:
        tflops = step_flops(model, plan, row["flop_convention"] or "model") / (time_s * num_gpus) / 1e12
    predicted = {
        "iteration_time_s": time_s,
        "tokens_per_s_per_gpu": result.metrics["tokens_per_s_per_gpu"],
        "tflops_per_gpu": tflops,
        "mfu": step_flops(model, plan, "model") / (time_s * num_gpus) / (README_PEAK_TFLOPS[gpu.name] * 1e12),
    }[row["metric"]]
    memory = "fits" if result.feasible else f"OOM {result.memory.total_gib:.0f}/{gpu.hbm_gib:g} GiB"
    return Outcome(row, predicted, memory, tuple(assumed + options[best][1]))


def print_rows(outcomes: list[Outcome]) -> None:
    print(
        f"{'id':34s} {'model':17s} {'gpu':9s} {'gpus':>5s} {'tp/pp/dp':>10s} {'metric':20s} "
        f"{'measured':>9s} {'predicted':>9s} {'error':>7s}  memory"
    )
    for o in outcomes:
        r = o.row
        print(
            f"{r['id']:34s} {r['model'][:17]:17s} {r['gpu']:9s} {r['num_gpus']:>5s} "
            f"{r['tp'] + '/' + r['pp'] + '/' + r['dp']:>10s} {r['metric']:20s} {o.measured:9.4g} "
            f"{o.predicted:9.4g} {o.error_pct:+6.1f}%  {o.memory}"
        )


def summary(label: str, outcomes: list[Outcome]) -> str:
    errors = [o.error_pct for o in outcomes]
    magnitudes = [abs(e) for e in errors]
    worst = max(outcomes, key=lambda o: abs(o.error_pct))
    return (
        f"  {label:44s} n={len(errors):4d}  median|e|={statistics.median(magnitudes):5.1f}%  "
        f"mean|e|={statistics.mean(magnitudes):5.1f}%  max|e|={max(magnitudes):5.1f}% ({worst.row['id']})  "
        f"bias={statistics.mean(errors):+6.1f}%"
    )


def print_summary(title: str, outcomes: list[Outcome], by: str = "source") -> None:
    print(f"\n{title}")
    if not outcomes:
        print("  no rows")
        return
    print(summary("all rows", outcomes))
    groups = defaultdict(list)
    for o in outcomes:
        groups[o.row[by]].append(o)
    for name, group in sorted(groups.items()):
        print(summary(name, group))
    print(f"  memory-infeasible (compared anyway): {sum(o.memory != 'fits' for o in outcomes)}")


def spearman(predicted: list[float], measured: list[float]) -> float:
    """Spearman's rank correlation: Pearson's correlation of the average ranks."""
    ranks = pd.DataFrame({"p": predicted, "m": measured}).rank()
    return float(ranks["p"].corr(ranks["m"]))


def ranking_by_model(outcomes: list[Outcome]) -> dict[str, float]:
    """Spearman correlation of predicted and measured values per (model, gpu, metric)."""
    groups = defaultdict(list)
    for o in outcomes:
        groups[o.row["model"], o.row["gpu"], o.row["metric"]].append(o)
    return {
        " ".join(key): spearman([o.predicted for o in group], [o.measured for o in group])
        for key, group in sorted(groups.items())
        if len(group) >= 3
    }


def is_ranking_file(rows: list[dict[str, str]]) -> bool:
    return len(rows) >= RANKING_MIN_ROWS * len({r["model"] for r in rows})


def evaluate_file(rows: list[dict[str, str]]) -> tuple[list[Outcome], dict[str, Counter]]:
    outcomes, skipped = [], defaultdict(Counter)
    by_id = {row["id"]: row for row in rows}
    for row in rows:
        try:
            outcomes.append(evaluate(row, rows_by_id=by_id))
        except (Skip, DseError) as exc:  # DseError: PlanError (invalid plan), CatalogError (unknown GPU)
            skipped[str(exc)][row["source"]] += 1
    return outcomes, skipped


def print_skipped(skipped: dict[str, Counter], outcomes: list[Outcome]) -> None:
    print(f"\nNot predicted: {sum(sum(c.values()) for c in skipped.values())} rows")
    for reason, by_source in sorted(skipped.items(), key=lambda kv: -sum(kv[1].values())):
        sources = ", ".join(f"{s} x{n}" for s, n in by_source.most_common())
        print(f"  {sum(by_source.values()):4d}  {reason}  [{sources}]")
    assumed = Counter(a for o in outcomes for a in o.assumptions)
    if assumed:
        print("Assumptions in predicted rows (rows affected):")
        for text, count in assumed.most_common():
            print(f"  {count:4d}  {text}")


def mape(outcomes: list[Outcome]) -> float:
    return statistics.mean(abs(o.error_pct) for o in outcomes) if outcomes else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        action="append",
        help="rows in the schema of training.csv (repeatable); "
        f"default: {DEFAULT_CSV.name} and ranking/{RANKING_CSV.name}",
    )
    parser.add_argument("--out", type=Path, help="also write id, predicted, measured, error_pct as CSV")
    args = parser.parse_args()
    paths = args.data or [DEFAULT_CSV, RANKING_CSV]
    print("error = predicted / measured - 1 (+ = the model is optimistic for throughput metrics)")
    everything, plain, correlations = [], [], {}
    for path in paths:
        with path.open(newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        outcomes, skipped = evaluate_file(rows)
        everything += outcomes
        print(f"\n=== {path.name}: {len(outcomes)} of {len(rows)} rows predicted")
        if is_ranking_file(rows):
            print_summary("SUMMARY by model", outcomes, by="model")
            print("Spearman rank correlation of predicted and measured, per model:")
            for name, rho in ranking_by_model(outcomes).items():
                correlations[f"{path.name}: {name}"] = rho
                print(f"  {name:44s} {rho:6.3f}")
            print(f"{path.name}: MAPE {mape(outcomes):.1f}% over {len(outcomes)} rows")
        else:
            plain += outcomes
            print_rows(outcomes)
            print_summary("SUMMARY", outcomes)
        print_skipped(skipped, outcomes)
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "predicted", "measured", "error_pct"])
            for o in everything:
                writer.writerow([o.row["id"], f"{o.predicted:.6g}", o.row["value"], f"{o.error_pct:.2f}"])
    if correlations:
        print(f"ranking: min Spearman {min(correlations.values()):.3f} over {len(correlations)} models")
    final = plain or everything
    print(f"MAPE {mape(final):.1f}% over {len(final)} rows")


if __name__ == "__main__":
    main()
