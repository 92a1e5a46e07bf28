"""A study's own catalogues: GPUs (`hardware.gpu_catalog`), a model file and a price book, read
relative to the spec and carried by the resolved study into the evaluation (no Ray here)."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from dse.errors import SpecError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from simulators.models import ModelSpec
from tests.conftest import TINY_PARAMS

CATALOGS = Path(__file__).parents[2] / "data" / "catalogs"
PRICES = Path(__file__).parents[3] / "dse" / "cost" / "prices.yaml"

# One big, compute-bound candidate: llama3-8b on one GPU (no collectives), micro-batches of 4.
SPEC = """
name: own-catalogues
model: {model}
training:
  seq_len: 4096
hardware:
  gpu: {gpus}
  gpu_catalog: catalogs/toy_gpu.yaml
  num_gpus: [1]
  fabric:
    nic_gbps: [400]
    gpus_per_server: 1
    nics_per_server: 1
search:
  tp: [1]
  pp: [1]
  micro_batch: [4]
  global_batch: [8]
  recompute: [none]
"""
PARAMS = {**TINY_PARAMS, "num_gpus": 1, "micro_batch": 4, "global_batch": 8}  # one GPU of the spec above


@pytest.fixture
def spec_dir(tmp_path: Path, monkeypatch) -> Path:
    """A spec directory holding the toy catalogues; the tests run from elsewhere, so a path that
    resolved against the working directory instead of the spec's would not be found."""
    shutil.copytree(CATALOGS, tmp_path / "study" / "catalogs")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return tmp_path / "study"


def write(spec_dir: Path, model: str = "llama3-8b", gpus: str = "[Toy-1, Toy-2x]", extra: str = "") -> Path:
    path = spec_dir / "spec.yaml"
    path.write_text(textwrap.dedent(SPEC.format(model=model, gpus=gpus)) + textwrap.dedent(extra))
    return path


def evaluate(path: Path, **params):
    evaluator = Evaluator(SearchSpace.from_study(resolve_study(load_study(path))))
    outcome = evaluator.evaluate({**PARAMS, **params})
    assert outcome.metrics, outcome.reason
    return outcome


def test_a_user_gpu_is_selectable_and_its_compute_time_follows_its_peak(spec_dir):
    spec = write(spec_dir)
    one = evaluate(spec, gpu="Toy-1").metrics
    two = evaluate(spec, gpu="Toy-2x").metrics
    # Compute-bound (memory kernels at 1e9 GB/s, no host time, one GPU): twice the peak, half
    # the time, up to the fixed 2 us per kernel launch (under 0.1 % of a step this large).
    assert one["iteration_time_s"] / two["iteration_time_s"] == pytest.approx(2.0, rel=1e-3)
    assert two["tokens_per_s"] / one["tokens_per_s"] == pytest.approx(2.0, rel=1e-3)
    # The rental price is the GPU file's own: 1.5 $/GPU-hour.
    assert one["usd_per_hour"] == 1.5


def test_an_alias_of_a_user_gpu_resolves_to_it(spec_dir):
    resolved = resolve_study(load_study(write(spec_dir, gpus="[toy]")))
    assert [gpu.name for gpu in resolved.gpus] == ["Toy-1"]


def without(text: str, field: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith(f"  {field}:"))


@pytest.mark.parametrize("field", ["sm_count", "calibrated_like", "gemm_tile_m", "nvls_efficiency"])
def test_a_gpu_file_missing_a_field_is_one_line_naming_it(spec_dir, field):
    gpus = spec_dir / "catalogs" / "toy_gpu.yaml"
    gpus.write_text(without(gpus.read_text(), field))
    with pytest.raises(SpecError) as err:
        resolve_study(load_study(write(spec_dir)))
    message = str(err.value)
    assert message.startswith("hardware.gpu_catalog: ") and "\n" not in message
    assert f"entry 0 (Toy-1): {field}: required field is missing" in message


def test_a_gpu_file_number_without_a_source_is_an_error(spec_dir):
    gpus = spec_dir / "catalogs" / "toy_gpu.yaml"
    gpus.write_text(gpus.read_text().replace('    sm_count: "made up for the tests"\n', "", 1))
    with pytest.raises(SpecError, match=r"entry 0 \(Toy-1\): no source for sm_count"):
        resolve_study(load_study(write(spec_dir)))


def test_a_user_gpu_may_not_take_a_built_in_name(spec_dir):
    gpus = spec_dir / "catalogs" / "toy_gpu.yaml"
    gpus.write_text(gpus.read_text().replace("aliases: [toy]", "aliases: [toy, h100]"))
    with pytest.raises(SpecError, match=r"entry 0 \(Toy-1\): GPU 'h100' is registered twice.*allowed: a name"):
        resolve_study(load_study(write(spec_dir)))


def test_a_missing_gpu_file_is_one_line_naming_the_field(spec_dir):
    (spec_dir / "catalogs" / "toy_gpu.yaml").unlink()
    with pytest.raises(SpecError, match=r"^hardware\.gpu_catalog: .*toy_gpu\.yaml"):
        resolve_study(load_study(write(spec_dir)))


def test_a_user_gpu_reaches_a_fresh_process_through_the_pickled_evaluator(spec_dir, tmp_path):
    """What Ray does: the evaluator is pickled and run in another process, which registered
    nothing; the GPU file is even gone by then, so nothing can have been re-read."""
    spec = write(spec_dir, gpus="[Toy-1]")
    evaluator = Evaluator(SearchSpace.from_study(resolve_study(load_study(spec))))
    params = {**PARAMS, "gpu": "Toy-1"}
    expected = evaluator.evaluate(params).metrics["iteration_time_s"]
    shipped = tmp_path / "evaluator.pkl"
    shipped.write_bytes(pickle.dumps((evaluator, params)))
    shutil.rmtree(spec_dir / "catalogs")
    code = (
        "import pickle, sys; evaluator, params = pickle.loads(open(sys.argv[1], 'rb').read()); "
        "print(repr(evaluator.evaluate(params).metrics['iteration_time_s']))"
    )
    root = Path(__file__).parents[3]
    run = subprocess.run(
        [sys.executable, "-c", code, str(shipped)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    assert float(run.stdout.strip()) == expected


def test_a_model_file_with_moe_and_mla_fields_evaluates_as_the_same_model_inline(spec_dir):
    from_file = write(spec_dir, model="catalogs/toy_moe.yaml", gpus="[Toy-1]")
    resolved = resolve_study(load_study(from_file))
    fields = yaml.safe_load((CATALOGS / "toy_moe.yaml").read_text())
    assert resolved.model == ModelSpec(**fields, source=resolved.model.source)
    assert resolved.model.is_moe and resolved.model.is_mla and resolved.model.dense_layers == 1
    inline = spec_dir / "inline.yaml"
    given = "model:\n" + textwrap.indent(yaml.dump(fields), "  ")
    inline.write_text(from_file.read_text().replace("model: catalogs/toy_moe.yaml", given))
    by_file, by_inline = evaluate(from_file, gpu="Toy-1"), evaluate(inline, gpu="Toy-1")
    assert by_file.metrics == by_inline.metrics
    assert by_file.constraints["plan_valid"] == 0.0


def test_a_bad_model_file_is_one_line_naming_the_field(spec_dir):
    model = spec_dir / "catalogs" / "toy_moe.yaml"
    model.write_text(model.read_text().replace("moe_top_k: 2\n", ""))
    with pytest.raises(SpecError, match=r"^model: .*toy_moe\.yaml: moe_top_k is required when moe_experts=8"):
        resolve_study(load_study(write(spec_dir, model="catalogs/toy_moe.yaml")))


def price_book(spec_dir: Path, **changes) -> None:
    book = yaml.safe_load(PRICES.read_text())
    for name, value in changes.items():
        *parents, leaf = name.split(".")
        node = book
        for key in parents:
            node = node[key]
        node[leaf] = value
    (spec_dir / "catalogs" / "book.yaml").write_text(yaml.dump(book))


def test_a_price_book_file_sets_the_prices_the_cost_metrics_use(spec_dir):
    h100 = "\n".join(["hardware:", "  gpu: [H100-SXM]", "  num_gpus: [8]"])
    spec = write(spec_dir, gpus="[H100-SXM]").read_text().split("hardware:")[0] + h100 + "\n"
    spec += "search: {tp: [1], pp: [1], micro_batch: [1], global_batch: [8], recompute: [none]}\n"
    default = spec_dir / "default.yaml"
    default.write_text(spec + "cost: {cloud_tier: hyperscaler}\n")
    own = spec_dir / "own.yaml"
    own.write_text(spec + "cost: {cloud_tier: hyperscaler, price_book: catalogs/book.yaml}\n")
    price = {"value": 20.0, "as_of": "2026-12", "source": "a quote"}
    pue = {"value": 2.0, "as_of": "2026-12", "source": "a quote"}
    price_book(spec_dir, **{"cloud_usd_per_gpu_hour.hyperscaler.H100-SXM": price, "pue": pue})
    params = {**PARAMS, "gpu": "H100-SXM", "num_gpus": 8, "micro_batch": 1}
    before = evaluate(default, **params).metrics
    after = evaluate(own, **params).metrics
    assert after["tokens_per_s"] == before["tokens_per_s"]
    assert after["usd_per_mtok"] == pytest.approx(8 * 20.0 / (after["tokens_per_s"] * 3600) * 1e6, rel=1e-12)
    assert before["usd_per_mtok"] == pytest.approx(8 * 12.29 / (before["tokens_per_s"] * 3600) * 1e6, rel=1e-12)
    assert after["kwh_per_mtok"] / before["kwh_per_mtok"] == pytest.approx(2.0 / 1.3, rel=1e-12)
    # The spec's own overrides still apply on top of the file.
    own.write_text(own.read_text().replace("price_book:", "usd_per_gpu_hour: {H100-SXM: 10.0}, price_book:"))
    assert evaluate(own, **params).metrics["usd_per_hour"] == 80.0


def test_a_price_book_file_missing_a_field_is_one_line_naming_it(spec_dir):
    book = yaml.safe_load(PRICES.read_text())
    del book["link_watts"]
    (spec_dir / "catalogs" / "book.yaml").write_text(yaml.dump(book))
    spec = write(spec_dir, extra="cost: {price_book: catalogs/book.yaml}\n")
    with pytest.raises(SpecError, match=r"^cost\.price_book: .*book\.yaml: link_watts: required field is missing$"):
        resolve_study(load_study(spec))


def test_the_command_line_simulates_a_user_gpu_and_refuses_a_bad_file_with_exit_2(spec_dir, capsys):
    from dse.cli import main

    spec = write(spec_dir)
    assert main(["simulate", str(spec), "--set", "gpu=Toy-2x", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["params"]["gpu"] == "Toy-2x" and report["metrics"]["iteration_time_s"] > 0
    gpus = spec_dir / "catalogs" / "toy_gpu.yaml"
    gpus.write_text(without(gpus.read_text(), "hbm_gib"))
    assert main(["simulate", str(spec), "--set", "gpu=Toy-2x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dse: error: hardware.gpu_catalog: ") and err.endswith("hbm_gib: required field is missing")
    assert len(err.splitlines()) == 1


def test_catalogue_paths_resolve_against_the_spec_and_the_saved_spec_still_finds_them(spec_dir, tmp_path):
    from dse.report.files import save_spec

    spec = write(spec_dir, model="catalogs/toy_moe.yaml", extra="cost: {price_book: catalogs/book.yaml}\n")
    price_book(spec_dir)
    study = load_study(spec)
    catalogs = spec_dir / "catalogs"
    assert study.hardware.gpu_catalog == str(catalogs / "toy_gpu.yaml")
    assert (study.model, study.cost.price_book) == (str(catalogs / "toy_moe.yaml"), str(catalogs / "book.yaml"))
    saved = save_spec(study, tmp_path / "report")  # a study directory elsewhere
    again = resolve_study(load_study(saved))
    assert again.gpus == resolve_study(study).gpus and again.model.name == "toy-moe"


@pytest.mark.parametrize(
    "line,problem",
    [
        ('  sm_count: "100"', "sm_count: Input should be a valid integer"),
        ("  bf16_tflops: true", "bf16_tflops: Input should be a valid number"),
        ("  hbm_gbytes_per_s: .inf", "hbm_gbytes_per_s: Input should be a finite number"),
        ("  tflops: 100", "tflops: unknown field"),
    ],
)
def test_a_gpu_file_is_read_strictly(spec_dir, line, problem):
    gpus = spec_dir / "catalogs" / "toy_gpu.yaml"
    field = line.split(":")[0].strip()
    text = gpus.read_text()
    text = without(text, field) if f"  {field}:" in text else text
    gpus.write_text(text.replace("  vendor: Test\n", f"  vendor: Test\n{line}\n", 1))
    with pytest.raises(SpecError, match=rf"entry 0 \(Toy-1\): {problem}"):
        resolve_study(load_study(write(spec_dir)))


def test_a_search_in_process_runs_on_user_gpus_and_its_report_re_renders(spec_dir):
    import pandas as pd

    from dse.cli import main

    spec = write(spec_dir, model="catalogs/toy_moe.yaml", extra="budget: {trials: 4, batch_size: 2}\nsampler: grid\n")
    out = spec_dir / "out"
    assert main(["search", str(spec), "--ray-address", "off", "--out", str(out)]) == 0
    trials = pd.read_csv(out / "trials.csv")
    assert set(trials["gpu"]) == {"Toy-1", "Toy-2x"}
    by_gpu = trials.groupby("gpu")["iteration_time_s"].min()
    assert by_gpu["Toy-1"] / by_gpu["Toy-2x"] == pytest.approx(2.0, rel=0.01)  # one plan, twice the peak
    assert main(["report", str(out)]) == 0  # from the saved spec.yaml, its catalogue paths absolute
