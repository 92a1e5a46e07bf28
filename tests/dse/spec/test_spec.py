"""Bad specs are caught before any trial runs, with one line naming the field."""

from pathlib import Path

import pytest

from dse.errors import DseError
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC

TOY_GPUS = Path(__file__).parents[2] / "data" / "catalogs" / "toy_gpu.yaml"


def error_of(write_spec, text):
    path = write_spec(text)
    with pytest.raises(DseError) as err:
        resolve_study(load_study(path))
    message = str(err.value)
    assert "\n" not in message
    return message


def replace(*pairs):
    text = TINY_SPEC
    for old, new in zip(pairs[::2], pairs[1::2]):
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize(
    "text,start,contains",
    [
        (replace("model: llama3-8b", "model: llama3-8"), "model: 'llama3-8'", "did you mean 'llama3-8b'"),
        (replace("gpu: [H100-SXM]", "gpu: [H100-SXM, H300]"), "hardware.gpu[1]: 'H300'", "allowed: V100-32GB"),
        (replace("tp: [1, 2, 4]", "tp: [1, 3]"), "search.tp: 3 does not divide kv_heads=8", "allowed: 1, 2, 4, 8"),
        (replace("pp: [1, 2]", "pp: [1, 64]"), "search.pp: 64 stages exceed layers=32", "allowed: 1 to 32"),
        (replace("pp: [1, 2]", "pp: [1, 32]"), "search.pp: 32", "leaves no whole data-parallel degree"),
        (
            replace("num_gpus: [8, 16]", "num_gpus: [6, 16]", "tp: [1, 2, 4]", "tp: [2, 4]", "pp: [1, 2]", "pp: [2]"),
            "hardware.num_gpus: 6",
            "not a multiple of any tp*pp*cp of the search space (4, 8)",
        ),
        (
            replace("global_batch: [64]", "global_batch: [3]", "tp: [1, 2, 4]", "tp: [1, 2]", "pp: [1, 2]", "pp: [1]"),
            "search.global_batch: 3",
            "dp*micro_batch",
        ),
        (
            replace("- usd_per_mtok: minimize", "- usd_per_token: minimize"),
            "objectives[1].metric: 'usd_per_token'",
            "did you mean 'usd_per_mtok'",
        ),
        (
            replace("- usd_per_mtok: minimize", "- cost_to_train_usd: minimize"),
            "objectives[1].metric",
            "needs training.train_tokens",
        ),
        (
            replace("  gpu: [H100-SXM]", "  gpus: [H100-SXM]"),
            "hardware.gpus: unknown field",
            "allowed: gpu, gpu_catalog, num_gpus",
        ),
        (replace("sampler: tpe", "sampler: cmaes"), "sampler: 'cmaes' is not allowed", "'nsga2'"),
        (
            replace("recompute: [none, full]", "recompute: [none, sometimes]"),
            "search.recompute",
            "allowed: none, selective, full",
        ),
        (replace("trials: 30", "trials: 0"), "budget.trials: 0", "greater than or equal to 1"),
        (replace("batch_size: 8", "batch_size: 0"), "budget.batch_size: 0 is not allowed", "allowed: auto"),
        (replace("batch_size: 8", "batch_size: many"), "budget.batch_size: 'many'", "a whole number"),
        (replace("tp: [1, 2, 4]", "tp: {low: 4, high: 1}"), "search.tp: high=1 is below low=4", ""),
        (replace("seq_len: 4096", "seq_len: 65536"), "training.seq_len: 65536 exceeds max_seq_len=8192", ""),
        (
            replace("gpu: [H100-SXM]", "gpu: [V100-32GB]"),
            "training.precision: 'bf16': V100-32GB has no bf16",
            "allowed: fp16",
        ),
        (TINY_SPEC + "constraints:\n  - {metric: usd_per_hour}\n", "constraints[0]: needs a bound", ""),
        (TINY_SPEC + "hardware_typo: 1\n", "hardware_typo: unknown field", "allowed: name, mode, model"),
        (
            replace("seq_len: 4096", "seq_len: 4096\n  seq_length: 1"),
            "training.seq_length: unknown field",
            "allowed: seq_len, precision",
        ),
        (replace("seq_len: 4096", "seq_len: -1"), "training.seq_len: -1", "greater than or equal to 1"),
        (
            replace("seq_len: 4096", "seq_len: 4096\n  recompute_modules: [core_attn, attention]"),
            "training.recompute_modules: 'attention' is not allowed",
            "allowed: core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts",
        ),
        (
            replace("seq_len: 4096", "seq_len: 4096\n  recompute_modules: [mla_up_proj]"),
            "training.recompute_modules: mla_up_proj needs multi-latent attention",
            "allowed: core_attn, layernorm, mlp",
        ),
        ("name: x\nmodel: [oops\n", "spec: ", "is not valid YAML"),
        (
            replace("recompute: [none, full]", "recompute: [none]\n  vpp: [1, 3]"),
            "search.vpp: 3 chunks per stage fit no pp",
            "layers=32",
        ),
        (
            replace("recompute: [none, full]", "recompute: [none]\n  cp: [1, 3]"),
            "search.cp: 3 does not split seq_len=4096",
            "",
        ),
        (
            replace("recompute: [none, full]", "recompute: [none]\n  ep: [2]"),
            "search.ep: ep=2 needs a mixture-of-experts",
            "allowed: 1",
        ),
        (
            replace("recompute: [none, full]", "recompute: [none]\n  zero_stage: [4]"),
            "search.zero_stage: 4 is not allowed",
            "allowed: 0, 1, 2, 3",
        ),
        (
            replace("num_gpus: [8, 16]", "num_gpus: [8, 16]\n  fabric: {family: [torus]}"),
            "hardware.fabric.family: 'torus' is not allowed",
            "allowed: leaf-spine, fat-tree, rail-optimized, dual-plane",
        ),
        (TINY_SPEC + "cost: {cloud_tier: spot}\n", "cost.cloud_tier: 'spot' is not allowed", "allowed: neocloud"),
        (  # a GPU of the user's own file has no server price in the default book
            replace(
                "gpu: [H100-SXM]", f"gpu: [Toy-1]\n  gpu_catalog: {TOY_GPUS}", "usd_per_mtok", "owned_usd_per_mtok"
            ),
            "cost.server_usd.Toy-1: owned_usd_per_mtok needs a server price",
            "give one",
        ),
        (
            replace("gpu: [H100-SXM]", "gpu: [H100-SXM, H200]") + "cost: {cloud_tier: hyperscaler}\n",
            "cost.usd_per_gpu_hour.H200: the price book has no hyperscaler price for H200",
            "give one",
        ),
    ],
)
def test_bad_spec_is_one_line_naming_the_field(write_spec, text, start, contains):
    message = error_of(write_spec, text)
    assert message.startswith(start), message
    assert contains in message, message


def test_inline_model_is_validated_with_its_field_path(write_spec):
    text = replace("model: llama3-8b", "model: {name: mine, layers: 4, hidden: 256, heads: 4, kv_heads: 3, vocab: 100}")
    message = error_of(write_spec, text)
    assert message.startswith("model.ffn_hidden: required field is missing"), message


def test_a_ten_line_spec_works_on_defaults(write_spec):
    study = load_study(write_spec("name: short\nmodel: llama3-8b\n"))
    resolved = resolve_study(study)
    assert resolved.objectives == ("tokens_per_s_per_gpu", "usd_per_mtok")
    assert resolved.directions == ("maximize", "minimize")
    assert str(study.output_dir) == "reports/short"


def test_command_line_overrides_replace_spec_fields(write_spec):
    study = load_study(write_spec(), **{"budget.trials": 5, "seed": 3, "output": "x", "budget.timeout_s": None})
    assert (study.budget.trials, study.seed, study.output) == (5, 3, "x")


def test_a_calibration_table_is_checked_before_any_trial_and_changes_the_answer(write_spec, tmp_path):
    from dse.evaluation.evaluate import Evaluator
    from dse.evaluation.space import SearchSpace

    header = "gpu,op,precision,m,n,k,batch,heads,seq_q,seq_kv,head_dim,causal,phase,nbytes,time_s,source\n"
    bad = tmp_path / "bad.csv"
    bad.write_text(header + "H100-SXM,gemm,bf16,4096,6144,4096,1,,,,,,,,-1,test\n")
    message = error_of(
        write_spec, TINY_SPEC.replace("  num_gpus: [8, 16]", f"  num_gpus: [8, 16]\n  calibration: {bad}")
    )
    assert message.startswith("hardware.calibration:") and "time_s" in message
    # Measured: the QKV projection of Llama-3-8B (4096 tokens, tp=1) takes 10 ms, far slower
    # than the curve; every other kernel keeps its analytical time.
    slow = tmp_path / "slow.csv"
    slow.write_text(header + "H100-SXM,gemm,bf16,4096,6144,4096,1,,,,,,,,0.01,test: a deliberately slow kernel\n")
    params = dict(TINY_PARAMS)
    times = []
    for extra in ("", f"  calibration: {slow}"):
        spec = write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n" + extra))
        outcome = Evaluator(SearchSpace.from_study(resolve_study(load_study(spec)))).evaluate(params)
        times.append(outcome.metrics["iteration_time_s"])
    # 32 layers x 8 micro-batches x one forward QKV GEMM at 10 ms: at least 2.5 s more per step.
    assert times[1] - times[0] > 2.5


def test_compute_fraction_defaults_to_the_fitted_value_and_can_be_set(write_spec):
    from simulators.hardware import get_gpu, sustained_compute_fraction

    h100 = get_gpu("H100-SXM")
    assert resolve_study(load_study(write_spec())).compute_fraction == {h100.name: sustained_compute_fraction(h100)}
    assert 0.5 < sustained_compute_fraction(h100) <= 1.0
    spec = write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n  compute_fraction: 0.9"))
    assert resolve_study(load_study(spec)).compute_fraction == {h100.name: 0.9}
    message = error_of(
        write_spec, TINY_SPEC.replace("  num_gpus: [8, 16]", "  num_gpus: [8, 16]\n  compute_fraction: 1.5")
    )
    assert message.startswith("hardware.compute_fraction: 1.5")


@pytest.mark.parametrize(
    "bounds,start,contains",
    [
        # 64 sequences x 4096 tokens = 262,144 tokens per step.
        (
            "{max: 131072}",
            "search.global_batch: 64 x seq_len 4096 = 262144 tokens is above",
            "allowed: 1 to 32 sequences",
        ),
        ("{min: 524288}", "search.global_batch: 64 x seq_len 4096 = 262144 tokens is below", "allowed: 128 or more"),
        ("{min: 5000, max: 6000}", "training.global_batch_tokens: no whole number of sequences", "seq_len=4096"),
        ("{min: 2.0e6, max: 1.0e6}", "training.global_batch_tokens: max=1e+06 is below min=2e+06", ""),
        ("{}", "training.global_batch_tokens: needs a bound", ""),
        ("{max: -1}", "training.global_batch_tokens.max: -1", "greater than 0"),
    ],
)
def test_global_batch_outside_the_recipes_token_bounds_is_refused(write_spec, bounds, start, contains):
    text = replace("seq_len: 4096", f"seq_len: 4096\n  global_batch_tokens: {bounds}")
    message = error_of(write_spec, text)
    assert message.startswith(start), message
    assert contains in message, message


def test_global_batch_inside_the_token_bounds_passes(write_spec):
    # Exactly on both bounds: 64 x 4096 = 262,144 tokens.
    text = replace("seq_len: 4096", "seq_len: 4096\n  global_batch_tokens: {min: 262144, max: 262144}")
    study = resolve_study(load_study(write_spec(text))).study
    assert study.training.global_batch_tokens.sequences(4096) == (64, 64)


def test_a_vpp_no_pipeline_split_can_hold_is_refused_and_embedding_loss_accounting_admits_it(write_spec):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "search_spaces" / "llama405b.yaml").read_text()
    even_only = text.replace("pipeline_split: [even, embedding+loss]", "pipeline_split: [even]")
    message = error_of(write_spec, even_only.replace("vpp: [1, 2, 4, 8]", "vpp: [8]"))
    assert message.startswith("search.vpp: 8 chunks per stage fit no pp and pipeline_split")
    assert "does not divide layers=126 of llama3-405b" in message
    resolve_study(load_study(write_spec(text.replace("vpp: [1, 2, 4, 8]", "vpp: [8]"))))  # embedding+loss: 128/64
    message = error_of(write_spec, text.replace("[even, embedding+loss]", "[even, middle]"))
    assert "search.pipeline_split" in message and "allowed: even, embedding, loss, embedding+loss" in message


def test_recompute_modules_bf16_gradients_and_cuda_graphs_reach_every_candidate(write_spec):
    from dse.evaluation.space import SearchSpace

    settings = "seq_len: 4096\n  recompute_modules: [layernorm, mlp]\n  grad_reduce_in_bf16: true\n  cuda_graphs: true"
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(replace("seq_len: 4096", settings)))))
    plan = space.candidate({**TINY_PARAMS, "recompute": "selective"}).plan
    assert plan.recompute_modules == ("layernorm", "mlp") and plan.gradient_bytes == 2 and plan.cuda_graphs


def test_a_pipeline_layout_must_fit_every_pipeline_shape_of_the_search(write_spec):
    from dse.evaluation.space import SearchSpace

    # The tiny spec's llama3-8b has 32 layers; pp 2 x vpp 1 takes a layout of two counts.
    layout = "seq_len: 4096\n  pipeline_layout: [15, 17]"
    message = error_of(write_spec, replace("seq_len: 4096", layout))
    assert message.startswith("training.pipeline_layout: pipeline_layout lists 2 virtual stages; pp*vpp=1*1=1")
    text = replace("seq_len: 4096", layout, "pp: [1, 2]", "pp: [2]")
    space = SearchSpace.from_study(resolve_study(load_study(write_spec(text))))
    assert space.candidate({**TINY_PARAMS, "pp": 2}).plan.pipeline_layout == (15, 17)
    message = error_of(write_spec, text.replace("[15, 17]", "[15, 16]"))
    assert "pipeline_layout holds 31 layers; llama3-8b has 32" in message


def test_a_space_where_no_plan_can_run_is_refused_before_any_trial(write_spec, capsys, tmp_path):
    """Each knob value passes its own check, but no combination runs: on 4 GPUs at pp 2 (dp 2)
    a global batch of 64 at micro-batch 32 gives each pipeline one micro-batch, and interleaving
    (vpp 2) needs a multiple of pp."""
    from dse.cli.commands import main

    text = replace(
        "num_gpus: [8, 16]",
        "num_gpus: [4]",
        "tp: [1, 2, 4]",
        "tp: [1]",
        "pp: [1, 2]",
        "pp: [2]",
        "micro_batch: [1, 2]",
        "micro_batch: [32]",
        "global_batch: [64]",
        "global_batch: [64]\n  vpp: [2]",
    )
    out = tmp_path / "out"
    assert main(["search", str(write_spec(text)), "--ray-address", "off", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse: error: search: no plan of the search space can run")
    assert "interleaved 1F1B needs microbatches=1 to be a multiple of pp=2" in err and not out.exists()


def _fabric_spec(fabric: str) -> str:
    return TINY_SPEC.replace("  num_gpus: [8, 16]", f"  num_gpus: [8, 16]\n  fabric: {fabric}")


@pytest.mark.parametrize(
    ("fabric", "message"),
    [
        (
            "{failures: {switches: {spline: 1}, ecmp_convergence_s: 1}}",
            "hardware.fabric.failures.switches.spline: 'spline' is not allowed; allowed: 'leaf', 'spine'",
        ),
        (
            "{failures: {switches: {spine: 0}, ecmp_convergence_s: 1}}",
            "hardware.fabric.failures.switches.spine: 0: Input should be greater than or equal to 1",
        ),
        (
            "{failures: {links: 2}}",
            "hardware.fabric.failures: ecmp_convergence_s: needed with failed switches or links",
        ),
        ("{failures: {spine: 1}}", "hardware.fabric.failures.spine: unknown field; allowed: switches, links"),
        ("{port_latency_s: -1}", "hardware.fabric.port_latency_s: -1: Input should be greater than or equal to 0"),
        ("{family: [torus]}", "hardware.fabric.family: 'torus' is not allowed; allowed: leaf-spine, fat-tree"),
    ],
)
def test_bad_fabric_failures_and_latency_are_one_line_errors(write_spec, fabric, message):
    assert message in error_of(write_spec, _fabric_spec(fabric))


def test_the_fabric_of_a_candidate_carries_the_specs_failures_and_port_latency(write_spec):
    text = _fabric_spec(
        "{family: [fat-tree-dual-tor], port_latency_s: 1.0e-6, "
        "failures: {switches: {leaf: 1}, links: 2, ecmp_convergence_s: 0.25}}"
    )
    fabric = resolve_study(load_study(write_spec(text))).fabric("fat-tree-dual-tor", 400.0)
    assert fabric.port_latency_s == 1e-6
    assert (fabric.failures.switches, fabric.failures.links, fabric.failures.ecmp_convergence_s) == (
        (("leaf", 1),),
        2,
        0.25,
    )


def test_a_serving_study_refuses_fabric_failures_it_would_not_model(write_spec):
    from tests.conftest import SERVING_SPEC

    text = SERVING_SPEC.replace(
        "  gpu: [H100-SXM]\n",
        "  gpu: [H100-SXM]\n  fabric: {failures: {switches: {spine: 1}, ecmp_convergence_s: 1}}\n",
    )
    assert "hardware.fabric.failures: not allowed in a serving study" in error_of(write_spec, text)


@pytest.mark.parametrize(
    "fidelity, model",
    [("", "fifo"), ("fidelity: {flow: {model: max_min}}\n", "max_min"), ("fidelity: {flow: {model: fifo}}\n", "fifo")],
)
def test_the_flow_levels_model_reaches_the_level(write_spec, fidelity, model):
    study = load_study(write_spec(extra=fidelity))
    assert dict(study.fidelity.levels())["flow"].options() == {"model": model}


def test_an_unknown_flow_model_is_one_line_naming_the_field(write_spec):
    message = error_of(write_spec, TINY_SPEC + "fidelity: {flow: {model: wfq}}\n")
    assert message.startswith("fidelity.flow.model"), message


def test_a_grouped_expert_kernel_the_simulator_lacks_is_one_line_naming_the_ones_it_has(write_spec):
    message = error_of(write_spec, replace("seq_len: 4096", "seq_len: 4096\n  moe_grouped_gemm: cutlass"))
    assert message == "training.moe_grouped_gemm: 'cutlass' is not allowed; allowed: multi_stream, fused"
