"""Hostile input files end in one SpecError line naming the field or file, fast, never a traceback."""

import os
import time
from pathlib import Path

import pytest

from dse.errors import DseError, SpecError
from dse.evaluation.workload import time_simai_workload
from dse.report.files import spec_yaml
from dse.spec import load_study
from dse.spec.inputs import MAX_DEPTH, load_yaml, read_text, regular_file
from dse.study import resolve_study
from tests.conftest import TINY_SPEC

HOSTILE = Path(__file__).parents[2] / "data" / "hostile"
SHIPPED = sorted((Path(__file__).parents[3] / "search_spaces").glob("*.yaml"))


def corpus() -> list[tuple[str, str]]:
    lines = (HOSTILE / "EXPECTED.tsv").read_text().splitlines()
    return [tuple(line.split("\t")) for line in lines if not line.startswith("#")]


def error_of(path: Path) -> str:
    with pytest.raises(DseError) as err:
        resolve_study(load_study(path))
    message = str(err.value)
    assert "\n" not in message and len(message) < 1000
    return message


@pytest.mark.parametrize("name,expected", corpus())
def test_every_hostile_spec_is_one_line_naming_the_field(name, expected):
    start = time.perf_counter()
    assert expected in error_of(HOSTILE / name)
    assert time.perf_counter() - start < 10  # the alias bomb took 157 s and 6 GB before


def test_the_corpus_lists_every_file_and_each_is_small():
    listed = {name for name, _ in corpus()}
    assert listed == {p.name for p in HOSTILE.iterdir()} - {"EXPECTED.tsv"}
    assert all((HOSTILE / name).stat().st_size < 4096 for name in listed)


@pytest.mark.parametrize("make,says", [
    (lambda tmp: tmp, "is a directory"),
    (lambda tmp: (os.mkfifo(tmp / "fifo"), tmp / "fifo")[1], "not a regular file"),
    (lambda tmp: Path("/dev/zero"), "not a regular file"),
    (lambda tmp: tmp / "absent.yaml", "does not exist"),
])  # fmt: skip
def test_only_regular_files_are_read(tmp_path, make, says):
    path = make(tmp_path)  # a FIFO without a writer would block a plain open() forever
    for read in (lambda: read_text(path, "spec", 1024), lambda: regular_file(path, "serving.trace", 1024)):
        with pytest.raises(SpecError, match=f"^(spec|serving.trace): {path} .*{says}"):
            read()


def test_a_file_over_its_limit_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("#" * 2048)
    assert read_text(path, "spec", 2048) == "#" * 2048
    with pytest.raises(SpecError, match=r"holds 2 KiB; allowed: at most 1 KiB"):
        read_text(path, "spec", 1024)


@pytest.mark.parametrize("data,says", [
    (b"name: x\0", "NUL bytes"),
    ("name: tiny".encode("utf-16"), "NUL bytes"),
    ("name: modèle".encode("latin-1"), "is not UTF-8"),
])  # fmt: skip
def test_text_must_be_utf8(tmp_path, data, says):
    path = tmp_path / "spec.yaml"
    path.write_bytes(data)
    with pytest.raises(SpecError, match=f"{says}.*allowed: UTF-8 text"):
        read_text(path, "spec", 1024)


@pytest.mark.parametrize("text,value", [
    ("a: 1:30", "1:30"),  # YAML 1.1 read 90
    ("a: 1_000", "1_000"),
    ("a: 0x10", "0x10"),
    ("a: yes", "yes"),
    ("a: off", "off"),
    ("a: 2024-01-01", "2024-01-01"),
    ("a: 1e8", 1e8),  # YAML 1.1 read a string
    ("a: 010", 10),  # YAML 1.1 read 8
    ("a: .inf", float("inf")),
    ("a: True", True),
    ("a: ~", None),
])  # fmt: skip
def test_yaml_is_read_with_the_core_schema(text, value):
    assert load_yaml(text, "spec: x") == {"a": value}


@pytest.mark.parametrize("text,says", [
    ("a: &x [1]\nb: *x\n", "line 2 is not valid YAML: alias \\*x is not allowed"),
    ("a: 1\nb: 2\na: 3\n", "line 3 is not valid YAML: key 'a' is repeated \\(first on line 1\\)"),
    ("a: " + "[" * 500 + "]" * 500, f"nesting deeper than {MAX_DEPTH} levels"),
    ("a: !!int 1:30", "'1:30' is not an integer"),
    ("a: !!bool maybe", "allowed: true, false"),
    ("a: !!binary aGk=", "could not determine a constructor"),
    ("a: " + "9" * 5000, "integer of more than 30 digits"),  # int() of it is a ValueError traceback
])  # fmt: skip
def test_yaml_limits(text, says):
    with pytest.raises(SpecError, match=f"^spec: x {says}" if says.startswith("line") else says):
        load_yaml(text, "spec: x")


def test_an_override_into_a_field_that_is_not_a_mapping_names_it(write_spec):
    path = write_spec(TINY_SPEC.split("budget:")[0] + "budget: 5\nsampler: tpe\n")
    with pytest.raises(SpecError, match=r"^budget: 5 is not a mapping; allowed: a mapping of fields \(trials, ...\)"):
        load_study(path, **{"budget.trials": 10})


@pytest.mark.parametrize("spec", SHIPPED, ids=lambda p: p.name)
def test_shipped_specs_stay_valid_and_their_saved_copy_reads_back(spec, tmp_path):
    study = load_study(spec)
    resolve_study(study)
    saved = tmp_path / "spec.yaml"
    saved.write_text(spec_yaml(study))
    assert load_study(saved) == study


def test_a_saved_spec_with_price_keys_and_an_inline_model_reads_back(write_spec, tmp_path):
    text = TINY_SPEC.replace(
        "model: llama3-8b",
        "model: {name: x, aliases: [y], layers: 2, hidden: 64, heads: 4, kv_heads: 4, ffn_hidden: 128, vocab: 100}",
    )
    study = load_study(write_spec(text + "cost:\n  nic_usd: {400: 1500}\n  usd_per_gpu_hour: {H100-SXM: 2.5}\n"))
    saved = tmp_path / "spec.yaml"
    saved.write_text(spec_yaml(study))  # JSON-mode dump: the Gb/s keys become strings
    assert load_study(saved) == study


def test_calibration_files_are_read_through_the_front_door(write_spec, tmp_path):
    table = tmp_path / "calibration.csv"
    table.write_bytes(b"gpu,op\0\n")
    extra = f"  calibration: {table}\n"
    path = write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]\n", "  num_gpus: [8, 16]\n" + extra))
    assert error_of(path).startswith(f"hardware.calibration: {table} holds NUL bytes")
    network = tmp_path / "network_calibration.yaml"
    network.write_text("nic_efficiency: " + "[" * 100 + "]" * 100)
    extra = f"  network_calibration: {network}\n"
    path = write_spec(TINY_SPEC.replace("  num_gpus: [8, 16]\n", "  num_gpus: [8, 16]\n" + extra))
    assert "nesting deeper than 50 levels" in error_of(path)  # safe_load raised RecursionError at 500


def test_workload_import_reads_through_the_front_door():
    with pytest.raises(SpecError, match="^workload import: /dev/zero is not a regular file"):
        time_simai_workload(Path("/dev/zero"), "H100-SXM")


@pytest.mark.parametrize(
    "data", [bytes(range(256)) * 8, "num_prefill_tokens,num_decode_tokens\n1,2\né,3\n".encode("latin-1")]
)
def test_a_binary_or_latin1_trace_is_one_line(write_spec, tmp_path, data):
    trace = tmp_path / "trace.csv"
    trace.write_bytes(data)
    path = write_spec(f"name: served\nmode: inference\nmodel: llama3-8b\nserving: {{trace: {trace}}}\n")
    assert "trace" in error_of(path)  # the latin-1 one was a UnicodeDecodeError traceback
