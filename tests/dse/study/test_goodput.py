"""The goodput metrics of a training study: spares priced by hand, time and cost with failures as
the ideal figures over the goodput fraction, the spares knob's `auto` the cheapest count, the
interval knob honoured, and bad values rejected in one line naming the field."""

from __future__ import annotations

import pytest

from dse.cost import default_price_book
from dse.errors import SpecError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import TINY_PARAMS, TINY_SPEC

PARAMS = {**TINY_PARAMS, "num_gpus": 16, "tp": 2, "pipeline_split": "even"}
BUDGET = "training:\n  seq_len: 4096\n  train_tokens: 1.0e11\n"


KNOBS = "  spare_servers: [0, 3, auto]\n  checkpoint_interval_s: [optimal, 3600]\n"


def evaluate(write_spec, reliability: str = "", **knobs) -> dict[str, float]:
    text = TINY_SPEC.replace("training:\n  seq_len: 4096\n", BUDGET).replace("search:\n", "search:\n" + KNOBS)
    evaluator = Evaluator(SearchSpace.from_study(resolve_study(load_study(write_spec(text + reliability)))))
    outcome = evaluator.evaluate({**PARAMS, "spare_servers": 0, "checkpoint_interval_s": "optimal", **knobs})
    assert outcome.reason is None
    return outcome.metrics


def test_time_and_cost_with_failures_are_the_ideal_ones_over_the_goodput(write_spec):
    m = evaluate(write_spec)
    assert 0 < m["goodput_fraction"] < 1 and m["spare_servers_chosen"] == 0
    for ideal in ("time_to_train_days", "cost_to_train_usd", "owned_cost_to_train_usd"):
        assert m[f"{ideal}_with_failures"] == pytest.approx(m[ideal] / m["goodput_fraction"])
    parts = ("goodput_fraction", "checkpoint_overhead_fraction", "lost_work_fraction", "restart_fraction")
    assert sum(m[p] for p in parts) == pytest.approx(1.0)


def test_spares_are_bought_and_rented_beside_the_job(write_spec):
    plain = evaluate(write_spec)
    spared = evaluate(write_spec, spare_servers=3)
    book = default_price_book()
    # One rail-optimized spare: a server, 8 NICs at 400G, 8 links and 8 leaf ports at 400G.
    per_spare = book.server_usd["H100-SXM"].value + 8 * (2_000 + 750 + 562.5)
    assert spared["capex_usd"] - plain["capex_usd"] == pytest.approx(3 * per_spare)
    assert spared["usd_per_hour"] / plain["usd_per_hour"] == pytest.approx((16 + 3 * 8) / 16)
    assert spared["goodput_fraction"] > plain["goodput_fraction"]
    assert spared["time_to_train_days"] == plain["time_to_train_days"]  # spares do not train


def test_auto_spares_is_the_cheapest_count_per_useful_hour(write_spec):
    auto = evaluate(write_spec, spare_servers="auto")
    per_useful_hour = {
        n: (m := evaluate(write_spec, spare_servers=n))["owned_usd_per_hour"] / m["goodput_fraction"] for n in range(4)
    }
    best = min(per_useful_hour, key=per_useful_hour.get)
    assert auto["spare_servers_chosen"] == best
    assert auto["owned_usd_per_hour"] / auto["goodput_fraction"] == pytest.approx(per_useful_hour[best])


def test_a_chosen_interval_and_sync_checkpoints_are_honoured(write_spec):
    m = evaluate(write_spec, "reliability:\n  checkpoint_mode: sync\n", checkpoint_interval_s=3600)
    step = m["iteration_time_s"]
    assert m["checkpoint_every_s"] == pytest.approx(round(3600 / step) * step)
    optimal = evaluate(write_spec, "reliability:\n  checkpoint_mode: sync\n")
    assert optimal["goodput_fraction"] >= m["goodput_fraction"]  # Daly's interval is the optimum
    assert m["checkpoint_blocking_s"] > 0


@pytest.mark.parametrize(
    "section,message",
    [
        ("checkpoint_storage: tape", r"^reliability.checkpoint_storage: 'tape' is not allowed; allowed: parallel-fs"),
        ("checkpoint_mode: lazy", r"^reliability.checkpoint_mode: "),
        ("rates_per_day: {gpus: 0.001}", r"^reliability.rates_per_day"),
        ("restart_s: {detection_s: -5}", r"^reliability.restart_s.detection_s"),
    ],
)
def test_bad_reliability_values_are_one_line_naming_the_field(write_spec, section, message):
    with pytest.raises(SpecError, match=message) as error:
        load_study(write_spec(TINY_SPEC + f"reliability:\n  {section}\n"))
    assert "\n" not in str(error.value)


def test_time_with_failures_needs_a_token_budget(write_spec):
    text = TINY_SPEC.replace("  - usd_per_mtok: minimize", "  - time_to_train_days_with_failures: minimize")
    with pytest.raises(SpecError, match="needs training.train_tokens"):
        resolve_study(load_study(write_spec(text)))


def test_a_serving_study_refuses_a_reliability_section(write_spec):
    from tests.conftest import SERVING_SPEC

    with pytest.raises(SpecError, match=r"^reliability: not allowed in a serving study"):
        resolve_study(load_study(write_spec(SERVING_SPEC + "reliability:\n  checkpoint_mode: sync\n")))


@pytest.mark.parametrize(
    "knob,message",
    [
        ("spare_servers: [-1]", r"^search.spare_servers: .* neither 'auto' nor 0"),
        ("checkpoint_interval_s: [soon]", r"^search.checkpoint_interval_s"),
        ("checkpoint_interval_s: [0.5]", r"^search.checkpoint_interval_s: .* neither 'optimal' nor 1 to"),
    ],
)
def test_bad_knob_values_are_one_line_naming_the_knob(write_spec, knob, message):
    with pytest.raises(SpecError, match=message):
        load_study(write_spec(TINY_SPEC.replace("search:\n", f"search:\n  {knob}\n")))


def test_a_serving_spec_spelling_out_the_default_reliability_resolves(write_spec):
    """A saved spec.yaml writes every field, the reliability defaults too: a serving study run
    again from it (dse report, dse batch) is not refused."""
    from tests.conftest import SERVING_SPEC

    resolve_study(load_study(write_spec(SERVING_SPEC + "reliability:\n  checkpoint_storage: parallel-fs\n")))


def test_dse_simulate_sets_the_reliability_knobs_by_word_or_number(write_spec, capsys):
    """`--set spare_servers=3` is a count (the spec refuses 3.0), `checkpoint_interval_s=600`
    seconds, and each knob's word stays a word, also where the spec lists only the words."""
    import json

    from dse.cli.commands import main

    words = "  spare_servers: [auto]\n  checkpoint_interval_s: [optimal]\n"
    text = TINY_SPEC.replace("training:\n  seq_len: 4096\n", BUDGET).replace("search:\n", "search:\n" + words)
    spec = write_spec(text)
    fixed = ["--set=num_gpus=16", "--set=tp=2", "--set=pp=1", "--set=micro_batch=1", "--set=recompute=none"]
    for spares, interval in (("3", "600"), ("auto", "optimal")):
        knobs = [f"--set=spare_servers={spares}", f"--set=checkpoint_interval_s={interval}"]
        assert main(["simulate", str(spec), *fixed, *knobs, "--json"]) == 0
        params = json.loads(capsys.readouterr().out)["params"]
        assert params["spare_servers"] == (3 if spares == "3" else "auto")
        assert params["checkpoint_interval_s"] == (600.0 if interval == "600" else "optimal")
