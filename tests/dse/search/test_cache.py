"""The shared content-addressed cache: what an address depends on, the claim/put/wait protocol
between studies, the file it persists to, and two studies sharing one cache in the engine."""

import json
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.evaluation.evaluate import Evaluator
from dse.evaluation.outcome import Outcome
from dse.evaluation.space import SearchSpace
from dse.search.cache import SharedCache, evaluation_context
from dse.search.engine import RunSettings, run_search
from dse.search.study_table import trials_frame
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS


def address(write_spec, extra="", file="spec.yaml", params=TINY_PARAMS, **overrides):
    resolved = resolve_study(load_study(write_spec(extra=extra, name=file), **overrides))
    return evaluation_context(resolved).address(params)


def test_an_address_depends_on_the_simulation_not_on_prices_objectives_or_knob_lists(write_spec):
    base = address(write_spec)
    assert address(write_spec, file="again.yaml") == base
    # What only the study's own judgement or search reads leaves the address alone.
    assert address(write_spec, "cost:\n  usd_per_gpu_hour: {H100-SXM: 9.5}\n", "priced.yaml") == base
    assert address(write_spec, "constraints:\n  - {metric: memory_gib_per_gpu, max: 60}\n", "bounded.yaml") == base
    assert address(write_spec, file="named.yaml", name="other", seed=99, sampler="random") == base
    assert address(write_spec, file="wider.yaml", **{"hardware.gpu": ["H100-SXM", "H200"]}) == base
    assert address(write_spec, file="tokens.yaml", **{"training.train_tokens": 1e12}) == base
    # What the simulation reads changes it.
    assert address(write_spec, file="longer.yaml", **{"training.seq_len": 8192}) != base
    assert address(write_spec, file="fp8.yaml", **{"training.precision": "fp8"}) != base
    assert address(write_spec, file="radix.yaml", **{"hardware.fabric": {"switch_radix": 32}}) != base
    assert address(write_spec, params={**TINY_PARAMS, "tp": 2}) != base


def test_a_calibration_file_is_addressed_by_its_content(write_spec, tmp_path):
    table = tmp_path / "kernels.csv"
    header = "gpu,op,precision,m,n,k,batch,heads,seq_q,seq_kv,head_dim,causal,phase,nbytes,time_s,source\n"
    table.write_text(header + "H100-SXM,gemm,bf16,4096,6144,4096,1,,,,,,,,0.002,test\n")
    first = address(write_spec, file="a.yaml", **{"hardware.calibration": str(table)})
    table.write_text(header + "H100-SXM,gemm,bf16,4096,6144,4096,1,,,,,,,,0.003,test\n")
    assert address(write_spec, file="b.yaml", **{"hardware.calibration": str(table)}) != first


def test_claims_split_known_mine_and_theirs_and_waiters_get_the_result():
    cache = SharedCache()
    done = Outcome(metrics={"x": 1.0})
    known, mine, theirs = cache.claim(["a", "b"])
    assert (known, mine, theirs) == ({}, [0, 1], [])
    known, mine, theirs = cache.claim(["a", "c"])  # another study, while the first simulates
    assert (known, mine, theirs) == ({}, [1], [0])
    got = []
    waiter = threading.Thread(target=lambda: got.append(cache.wait("a")))
    waiter.start()
    cache.put("a", done)
    waiter.join(timeout=5)
    assert got == [done]
    cache.release(["b"])  # given up: a waiter for "b" gets None and simulates it itself
    assert cache.wait("b") is None
    assert cache.claim(["a"])[0] == {0: done}
    assert cache.hits == 2


def test_the_file_keeps_outcomes_but_not_failures_and_survives_a_cut_line(tmp_path):
    path = tmp_path / "cache.jsonl"
    cache = SharedCache(path)
    cache.claim(["ok", "failed"])
    cache.put("ok", Outcome(metrics={"t": 2.5}, constraints={"plan_valid": 0.0}, reason="slow"))
    cache.put("failed", Outcome(error="boom"))
    cache.close()
    with path.open("a") as file:
        file.write('{"address": "cut", "metr')  # the driver was killed mid-line
    again = SharedCache(path)
    assert len(again) == 1
    assert again.claim(["ok", "failed"])[0][0] == Outcome({"t": 2.5}, {"plan_valid": 0.0}, "slow")
    assert [json.loads(line)["address"] for line in path.read_text().splitlines()[:1]] == ["ok"]


BOUNDED = """
constraints:
  - {metric: memory_gib_per_gpu, max: 40}
cost:
  usd_per_gpu_hour: {H100-SXM: 7.0}
"""


def test_a_second_study_takes_shared_outcomes_and_judges_them_with_its_own_prices_and_bounds(write_spec, tmp_path):
    cache = SharedCache(tmp_path / "cache.jsonl")
    first = resolve_study(load_study(write_spec(), sampler="grid", **{"budget.trials": 100}))
    second = resolve_study(
        load_study(write_spec(extra=BOUNDED, name="b.yaml"), sampler="grid", **{"budget.trials": 100})
    )
    a = run_search(first, RunSettings(tmp_path / "a", None, "off"), shared=cache)
    b = run_search(second, RunSettings(tmp_path / "b", None, "off"), shared=cache)
    distinct = len({first.kind.params_key(p) for p in SearchSpace.from_study(first).grid()})
    assert a.evaluated == distinct and a.shared_hits == 0
    assert b.evaluated == 0 and b.shared_hits == distinct  # every candidate simulated once in all
    evaluator = Evaluator(SearchSpace.from_study(second))
    trials = trials_frame(b.study, second)
    for trial in b.study.get_trials()[:6]:  # judged as the second study would judge them itself
        direct = evaluator.evaluate(trial.params)
        row = trials[trials["trial"] == trial.number].iloc[0]
        assert row["usd_per_mtok"] == pytest.approx(direct.metrics["usd_per_mtok"], rel=1e-12)
        assert bool(row["feasible"]) == direct.feasible
        assert trial.constraints == pytest.approx(dict(direct.constraints))


def _records(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_forged_record_is_refused_and_its_candidate_simulated_again(write_spec, tmp_path, capsys):
    path = tmp_path / "cache.jsonl"
    resolved = resolve_study(load_study(write_spec(), sampler="grid", **{"budget.trials": 100}))
    first = run_search(resolved, RunSettings(tmp_path / "a", None, "off"), shared=SharedCache(path))
    records = _records(path)
    forged = records[3]
    forged["metrics"]["tokens_per_s_per_gpu"] = 1e12  # a front no plan reaches; the digest left as it was
    _write(path, records)
    capsys.readouterr()
    cache = SharedCache(path)
    assert len(cache) == len(records) - 1 and forged["address"] not in cache._outcomes
    err = capsys.readouterr().err
    assert f"{path}: refused 1 records (1 whose digest does not match its content" in err and "line 4" in err
    second = run_search(resolved, RunSettings(tmp_path / "b", None, "off"), shared=cache)
    assert second.evaluated == 1 and second.shared_hits == first.evaluated - 1
    best = max(t.values[0] for t in second.study.get_trials() if t.values)
    assert best < 1e12
    assert forged["address"] in {r["address"] for r in _records(path)[len(records) :]}  # stored again, genuine


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda r: r.pop("address"), "without address"),
        (lambda r: r.update(extra=1), "with unexpected keys 'extra'"),
        (lambda r: r.pop("digest"), "without a digest (written by an older dse)"),
        (lambda r: r.update(address="elsewhere"), "whose digest does not match"),  # moved to another address
        (lambda r: r["metrics"].update(t=float("nan")), "not a finite number"),
        (lambda r: r["metrics"].update(t="2.5"), "not a finite number"),
        (lambda r: r["metrics"].update(t=True), "not a finite number"),
        (lambda r: r.update(metrics=[1.0]), "not a finite number"),
        (lambda r: r["metrics"].update(t=10**400), "not a finite number"),  # no float holds it
        (lambda r: r.update(error="boom"), "or an error"),
        (lambda r: r.update(reason=3), "a reason that is not a string"),
        (lambda r: r.clear(), "without address"),
    ],
)
def test_a_record_that_breaks_the_schema_is_refused_not_a_traceback(tmp_path, capsys, damage, problem):
    path = tmp_path / "cache.jsonl"
    cache = SharedCache(path)
    cache.put("kept", Outcome(metrics={"t": 2.5}, constraints={"plan_valid": 0.0}))
    cache.put("damaged", Outcome(metrics={"t": 3.5}, constraints={"plan_valid": 0.0}))
    cache.close()
    records = _records(path)
    damage(records[1])
    _write(path, [*records, "not an object", [1]])
    capsys.readouterr()
    again = SharedCache(path)
    assert list(again._outcomes) == ["kept"]
    err = capsys.readouterr().err
    assert "refused 3 records (1 " in err and problem in err and "2 not a JSON object (first at line 3)" in err


def test_a_number_of_more_digits_than_python_reads_is_refused(tmp_path, capsys):
    path = tmp_path / "cache.jsonl"
    path.write_text('{"address": "long", "metrics": {"t": ' + "1" * 5000 + "}}\n")
    assert len(SharedCache(path)) == 0
    assert "refused 1 records (1 not JSON (first at line 1))" in capsys.readouterr().err


def test_a_cut_last_line_is_dropped_and_the_next_record_kept(tmp_path, capsys):
    path = tmp_path / "cache.jsonl"
    cache = SharedCache(path)
    cache.put("a", Outcome(metrics={"t": 1.0}))
    with path.open("ab") as file:
        file.write(b'{"address": "cut", "metr')  # another run sharing the file, killed mid-line
    cache.put("b", Outcome(metrics={"t": 2.0}))
    cache.close()
    assert "dropped those 24 bytes" in capsys.readouterr().err
    with path.open("ab") as file:
        file.write(b'{"address": "cut again"')  # this time while no run had the file open
    again = SharedCache(path)
    again.put("c", Outcome(metrics={"t": 3.0}))
    again.close()
    assert "dropped those 23 bytes" in capsys.readouterr().err
    assert [r["address"] for r in _records(path)] == ["a", "b", "c"]
    assert len(SharedCache(path)) == 3 and capsys.readouterr().err == ""


def test_an_outcome_with_a_non_finite_number_stays_in_memory_but_is_not_stored(tmp_path):
    path = tmp_path / "cache.jsonl"
    cache = SharedCache(path)
    cache.put("inf", Outcome(metrics={"t": float("inf")}))
    assert cache.claim(["inf"])[0] == {0: Outcome(metrics={"t": float("inf")})}
    cache.close()
    assert path.read_text() == ""


def test_a_cache_path_that_is_not_a_regular_file_is_refused(tmp_path):
    import os

    from dse.errors import DseError

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):  # a FIFO would block, a directory cannot be read as lines
        with pytest.raises(DseError, match=f"cache: {path} is not a regular file"):
            SharedCache(path)


VALUES = st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=6)
RECORD = st.dictionaries(
    st.sampled_from(["address", "digest", "metrics", "constraints", "reason", "error", "extra"]),
    VALUES | st.dictionaries(st.text(max_size=4), VALUES, max_size=3) | st.lists(VALUES, max_size=2),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(RECORD.map(json.dumps).map(str.encode) | st.binary(max_size=40), max_size=5))
def test_any_file_content_loads_without_a_traceback(tmp_path, lines):
    """Records with any keys and values, and arbitrary bytes, after a genuine record."""
    path = tmp_path / "cache.jsonl"
    path.unlink(missing_ok=True)  # tmp_path is the same for every example
    cache = SharedCache(path)
    cache.put("genuine", Outcome(metrics={"t": 1.0}))
    cache.close()
    with path.open("ab") as file:
        file.write(b"\n".join(lines))
    again = SharedCache(path)
    assert again.claim(["genuine"])[0] == {0: Outcome(metrics={"t": 1.0})}  # nothing appended loses it
    again.close()
