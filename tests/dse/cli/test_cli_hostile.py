"""Hostile command lines: every bad flag, file or path ends in one line naming what is wrong and
exit status 2, never a traceback; HTML never carries user text unescaped (issue 14)."""

from __future__ import annotations

import csv
import os

import pytest

from dse.cli.commands import main
from tests.conftest import TINY_PARAMS

FIXED = ["--set", "num_gpus=8", "--set", "tp=1", "--set", "pp=1", "--set", "micro_batch=1", "--set", "recompute=none"]


def _refused(capsys, argv: list[str], *expected: str) -> str:
    """Run the CLI, assert exit 2 with one line on stderr holding every `expected`; return it."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dse"), err
    for text in expected:
        assert text in err, err
    return err


@pytest.mark.parametrize(
    ("assignment", "expected"),
    [
        ("tp=0", ["--set tp=0", "search.tp", "outside 1..1048576"]),
        ("gpu=NOPE", ["--set gpu=NOPE", "allowed: H100-SXM"]),
        ("gpu=H100-SXN", ["did you mean 'H100-SXM'?"]),
        ("gpu=H200", ["not a GPU of this spec"]),  # in the catalogue, but the spec has no price for it
        ("recompute=selctive", ["--set recompute=selctive", "allowed: none, selective, full", "'selective'?"]),
        ("zero_stage=7", ["allowed: 0, 1, 2, 3"]),
        ("fabric=fat-tre", ["hardware.fabric.family"]),
        ("tpp=2", ["did you mean 'tp'?", "knobs: gpu"]),
        ("tp=two", ["tp='two' is not an integer"]),
        ("sequence_parallel=yes", ["true or false"]),
        ("tp", ["'tp' is not knob=value"]),
    ],
)
def test_simulate_refuses_a_bad_set_in_one_line(write_spec, capsys, assignment, expected):
    _refused(capsys, ["simulate", str(write_spec()), *FIXED, "--set", assignment], *expected)


def test_simulate_still_explains_a_plan_that_cannot_run(write_spec, capsys):
    """A value the spec's types allow but the plan cannot use is a finding, not a usage error."""
    assert main(["simulate", str(write_spec()), *FIXED, "--set", "tp=3", "--json"]) == 0
    assert "not a multiple of tp*pp*cp" in capsys.readouterr().out


def _front(path, **changes) -> None:
    params = {**TINY_PARAMS, **changes}
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(params)
        writer.writerow(params.values())


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty"),
        (bytes(range(256)) * 8, "is not a readable CSV"),
        (b'a,b\n1,2,3,4\n"unterminated\n', "is not a readable CSV"),
        (b"a,b\n1,2\n", "is not a pareto.csv of this study"),
    ],
)
def test_config_best_refuses_a_damaged_pareto_csv(write_spec, tmp_path, capsys, content, expected):
    study = tmp_path / "study"
    study.mkdir()
    (study / "pareto.csv").write_bytes(content)
    argv = ["simulate", str(write_spec()), "--config", "best", "--study", str(study)]
    _refused(capsys, argv, "--config:", str(study / "pareto.csv"), expected)


def test_config_best_checks_each_cell_like_a_set(write_spec, tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    _front(study / "pareto.csv", tp=0)
    argv = ["simulate", str(write_spec()), "--config", "best", "--study", str(study)]
    _refused(capsys, argv, "pareto.csv tp=0", "outside 1..1048576")
    _front(study / "pareto.csv", recompute="selctive")
    _refused(capsys, argv, "allowed: none, selective, full")


def test_config_best_reads_a_sound_front(write_spec, tmp_path, capsys):
    study = tmp_path / "study"
    study.mkdir()
    _front(study / "pareto.csv")
    assert main(["simulate", str(write_spec()), "--config", "best", "--study", str(study), "--json"]) == 0
    assert '"tp": 1' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["validate", "DIR", "--max-mb", "nan"], "argument --max-mb: nan is out of range; allowed: a finite number"),
        (["validate", "DIR", "--max-mb=-inf"], "--max-mb: -inf is out of range"),
        (["validate", "DIR", "--max-mb", "lots"], "--max-mb: 'lots' is not a number"),
        (["validate", "DIR", "--top", "0"], "--top: 0 is out of range; allowed: 1 to 1000"),
        (["validate", "DIR", "--max-ranks", "1"], "--max-ranks: 1 is out of range; allowed: 2 to 1024"),
        (["search", "SPEC", "--trials", "-3"], "--trials: -3 is out of range"),
        (["search", "SPEC", "--timeout", "nan"], "--timeout: nan is out of range"),
        (["search", "SPEC", "--seed", str(2**32)], "--seed: 4294967296 is out of range; allowed: 0 to 4294967295"),
        (["batch", "SPEC", "--timeout", "inf"], "--timeout: inf is out of range"),
        (["topologies", "--num-gpus", "0"], "--num-gpus: 0 is out of range"),
        (["topologies", "--nic-gbps", "nan"], "--nic-gbps: nan is out of range"),
        (["simulate"], "the following arguments are required: spec"),
    ],
)
def test_a_bad_numeric_flag_is_one_line_naming_the_flag_and_its_range(capsys, argv, expected):
    err = _refused(capsys, argv, expected)
    assert "usage:" not in err


class _ClosedPipe:
    """A stdout whose reader has gone, as `dse ... | head` leaves it."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError("no file")  # as pytest's captured stdout


class _BufferedClosedPipe(_ClosedPipe):
    """The same behind a buffer: the writes succeed, the reader's absence shows at the flush."""

    def write(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize("pipe", [_ClosedPipe, _BufferedClosedPipe])
@pytest.mark.parametrize("command", [["gpus"], ["models"], ["topologies"], ["simulate", "SPEC", *FIXED, "--json"]])
def test_a_closed_pipe_ends_the_command_quietly(write_spec, capsys, monkeypatch, command, pipe):
    from dse.cli.commands import EXIT_BROKEN_PIPE

    argv = [str(write_spec()) if arg == "SPEC" else arg for arg in command]
    monkeypatch.setattr("sys.stdout", pipe())
    assert main(argv) == EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_dse_piped_into_a_reader_that_left_prints_no_traceback(write_spec, tmp_path):
    """The real thing: the reading end is closed before dse (a new interpreter) writes a byte."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dse", "simulate", str(write_spec()), *FIXED, "--json"],
            stdout=write,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
        )
    finally:
        os.close(write)
    assert done.stderr.decode() == ""
    assert done.returncode == 141


def _unrelated(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("someone's notes\n")
    return path


@pytest.mark.parametrize(
    ("flag", "where", "expected"),
    [
        ("--out", lambda tmp: "/proc/dse-x", "--out: cannot write in /proc"),
        ("--out", _unrelated, "exists and is not a directory"),
        ("--out", lambda tmp: "/dev/null", "--out: /dev/null exists and is not a directory"),
        ("--storage", lambda tmp: "bogus://x", "--storage: 'bogus://x' is not a storage URL"),
        ("--storage", lambda tmp: "/dev/null", "--storage: /dev/null is not a regular file"),
        ("--storage", lambda tmp: "sqlite:////proc/dse-x/y.db", "--storage: cannot write in /proc"),
        ("--storage", _unrelated, "holds something other than an Optuna journal"),
        ("--storage", lambda tmp: "sqlite://", "a database in memory; the study would be lost"),
        ("--cache", lambda tmp: "/dev/full", "--cache: /dev/full is not a regular file"),
        ("--out", lambda tmp: tmp / ("d" * 300), "has a name over 255 bytes"),
    ],
)
def test_search_refuses_a_place_it_cannot_write_before_it_starts(write_spec, tmp_path, capsys, flag, where, expected):
    spec, target = write_spec(), str(where(tmp_path))
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    argv = ["search", str(spec), "--ray-address", "off", "--trials", "2", flag, target]
    if flag != "--out":
        argv += ["--out", str(tmp_path / "out")]
    _refused(capsys, argv, expected)
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before  # nothing appended
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_search_refuses_a_read_only_output_directory(write_spec, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        _refused(capsys, ["search", str(write_spec()), "--out", str(locked / "out")], "--out: cannot write in")
    finally:
        locked.chmod(0o755)


def test_a_storage_whose_driver_is_missing_is_one_line_without_the_password(write_spec, tmp_path, capsys):
    pytest.importorskip("sqlalchemy")
    try:
        import MySQLdb  # noqa: F401

        pytest.skip("MySQLdb is installed here")
    except ImportError:
        pass
    argv = ["search", str(write_spec()), "--storage", "mysql://u:secret@localhost/db", "--out", str(tmp_path / "o")]
    err = _refused(capsys, argv, "--storage: mysql://u:***@localhost/db needs the database driver MySQLdb")
    assert "secret" not in err


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("output: /tmp/dse-elsewhere", "output: '/tmp/dse-elsewhere' lies outside"),
        ("output: ../up", "output: '../up' lies outside"),
        ("storage: ../x.journal", "storage: '../x.journal' lies outside"),
        ("storage: /tmp/dse-elsewhere.journal", "give --storage on the command line"),
        ("storage: sqlite:////tmp/dse-elsewhere.db", "storage: '/tmp/dse-elsewhere.db' lies outside"),
    ],
)
def test_a_spec_may_not_write_outside_the_output_directory(write_spec, tmp_path, capsys, monkeypatch, field, expected):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(extra=field + "\n")
    _refused(capsys, ["search", str(spec), "--ray-address", "off", "--trials", "2"], expected)
    assert not (tmp_path / "reports").exists()


def test_a_spec_storage_stays_inside_out_even_when_out_is_given(write_spec, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = write_spec(extra="storage: reports/tiny/study.db.journal\n")
    argv = ["search", str(spec), "--ray-address", "off", "--trials", "2", "--out", str(tmp_path / "other")]
    _refused(capsys, argv, "storage: 'reports/tiny/study.db.journal' lies outside")


def test_the_command_line_may_name_any_storage(write_spec, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    journal = tmp_path / "elsewhere" / "study.journal"
    argv = ["search", str(write_spec()), "--ray-address", "off", "--trials", "2", "--storage", str(journal)]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    assert journal.stat().st_size > 0
    assert main(["report", str(tmp_path / "out")]) == 0  # the journal named in spec.yaml reads back


@pytest.mark.parametrize(
    "argv",
    [
        ["workload", "export", "SPEC", *FIXED, "--out", "/dev/null"],
        ["workload", "export", "SPEC", *FIXED, "--out", "/proc/dse-x/w.txt"],
        ["workload", "ops", "SPEC", *FIXED, "--csv", "TMP"],
        ["topologies", "--simai", "TMP"],
        ["report", "/dev/null"],
        ["validate", "/dev/null"],
    ],
)
def test_every_output_flag_is_checked(write_spec, tmp_path, capsys, argv):
    argv = [str(write_spec()) if a == "SPEC" else str(tmp_path) if a == "TMP" else a for a in argv]
    _refused(capsys, argv, "dse: error:")


HOSTILE = "<script>alert(1)</script>"


def test_a_hostile_model_name_reaches_every_html_page_escaped(write_spec, tmp_path, capsys):
    """batch.html rendered its studies table unescaped: a model's name ran in the reader's browser."""
    import html

    from tests.conftest import TINY_SPEC

    inline = f"model:\n  name: '{HOSTILE}'\n  layers: 4\n  hidden: 1024\n  ffn_hidden: 4096\n  heads: 8\n"
    inline += "  kv_heads: 8\n  vocab: 32000\n"
    spec = write_spec(TINY_SPEC.replace("model: llama3-8b\n", inline))
    batch = tmp_path / "batch"
    out = batch / "tiny"
    assert main(["batch", str(spec), "--ray-address", "off", "--trials", "6", "--out", str(batch)]) == 0
    for page in (out / "report.html", batch / "batch.html"):
        text = page.read_text()
        assert HOSTILE not in text, page
        assert html.escape(HOSTILE) in text, page
    assert '<a href="tiny/report.html">tiny</a>' in (batch / "batch.html").read_text()  # the link still works


def test_names_print_as_they_are_and_long_ones_are_cut_short(write_spec, tmp_path, capsys, monkeypatch):
    """A model named `[/]...` was a rich MarkupError; names are text to the terminal, not markup,
    and a long study name is shown cut to a line, in the terminal and in pareto.png's title (a
    megabyte of name took minutes to draw there); the files keep it whole."""
    from dse.report.png import PngProcess
    from tests.conftest import TINY_SPEC

    titles = []  # of the plot handed to the process that draws pareto.png
    send = PngProcess.send
    monkeypatch.setattr(PngProcess, "send", lambda p, plot, path: titles.append(plot.title) or send(p, plot, path))

    name = "n" * 250
    inline = "model:\n  name: '[/]oops[bold red]x'\n  layers: 4\n  hidden: 1024\n  ffn_hidden: 4096\n  heads: 8\n"
    inline += "  kv_heads: 8\n  vocab: 32000\n"
    spec = write_spec(TINY_SPEC.replace("model: llama3-8b\n", inline).replace("name: tiny", f"name: {name}"))
    out = tmp_path / "out"
    assert main(["search", str(spec), "--ray-address", "off", "--trials", "3", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "training of [/]oops[bold red]x," in shown
    assert name[:79] + "…" in shown and name not in shown.replace(str(out), "")
    assert f"name: {name}" in (out / "spec.yaml").read_text()
    assert titles and all(len(t) < 150 for t in titles)
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_workload_file_must_be_a_regular_file(tmp_path, capsys):
    _refused(capsys, ["workload", "import", str(tmp_path), "--gpu", "H100-SXM"], f"file: {tmp_path} is not a regular")
    _refused(capsys, ["workload", "import", "/dev/zero", "--gpu", "H100-SXM"], "is not a regular file")


def test_an_io_error_during_a_run_is_one_line(capsys, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", "gpus.csv")

    monkeypatch.setattr("simulators.hardware.gpu_catalog", full)
    assert main(["gpus"]) == 1
    assert capsys.readouterr().err == "dse: error: [Errno 28] No space left on device: 'gpus.csv'\n"


@pytest.fixture(scope="module")
def finished_batch(tmp_path_factory):
    """A batch of the tiny study, run in process once for the tests that damage its files."""
    import textwrap

    from tests.conftest import TINY_SPEC

    root = tmp_path_factory.mktemp("batch")
    spec = root / "spec.yaml"
    spec.write_text(textwrap.dedent(TINY_SPEC))
    assert main(["batch", str(spec), "--ray-address", "off", "--trials", "6", "--out", str(root / "out")]) == 0
    return root / "out"


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "batch.yaml",
            "studies:\n- {name: tiny, dir: ../../elsewhere}\n",
            "studies[0].dir '../../elsewhere' lies outside",
        ),
        ("batch.yaml", "studies:\n- {name: tiny, dir: /tmp}\n", "studies[0].dir '/tmp' lies outside"),
        ("batch.yaml", "studies: 5\n", "it needs `studies:`"),
        ("batch.yaml", "studies:\n- tiny\n", "studies[0] needs a name and a dir"),
        ("batch.yaml", b"\xff\xfe\x00binary", "is not a batch listing"),
        ("studies.csv", b"\xff\xfe\x00binary", "studies.csv is not readable"),
        ("studies.csv", "a,b\n1,2\n", "studies.csv has no column study"),
    ],
)
def test_report_on_a_damaged_batch_directory_is_one_line(finished_batch, tmp_path, capsys, name, content, expected):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(finished_batch, out)
    target = out / name
    target.write_bytes(content if isinstance(content, bytes) else content.encode())
    _refused(capsys, ["report", str(out)], f"report: {target}", expected)


def test_report_re_renders_a_sound_batch_directory(finished_batch, capsys):
    assert main(["report", str(finished_batch)]) == 0
    assert "1 studies re-rendered" in capsys.readouterr().out
