"""Request streams: arrival statistics, length distributions, traces, seeding and errors.

Statistical checks use n = 100k-200k draws and a tolerance of 5 standard errors of the estimator
(a false failure is a < 1e-6 event), so they fail on a wrong rate, shape or support, not by chance.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.serving._lengths import empirical, fixed, uniform, zipf
from simulators.serving._requests import (
    Requests,
    TraceData,
    gamma_arrivals,
    load_trace,
    make_requests,
    poisson_arrivals,
    static_arrivals,
)

TRACES = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "traces"


def reference_trace(name: str) -> Path:
    """A trace of ../shared/reference/traces (beside the checkout); the test skips without it."""
    if not (TRACES / name).is_file():
        pytest.skip("../shared/reference/traces is not beside this checkout")
    return TRACES / name


N = 100_000


def _cv_tolerance(cv: float, n: int) -> float:
    """5 standard errors of the sample CV of n gamma gaps (delta method).

    Relative SE of the sample std is sqrt(2 + 6/k) / 2 / sqrt(n) (gamma shape k = 1/cv^2, excess
    kurtosis 6/k); relative SE of the mean is cv / sqrt(n); the CV's relative error is at most their sum.
    """
    k = 1.0 / cv**2
    return 5 * cv * (math.sqrt(2 + 6 / k) / 2 + cv) / math.sqrt(n)


def test_poisson_mean_gap_is_one_over_rate_and_cv_is_one():
    rate_qps = 4.0
    gaps = np.diff(poisson_arrivals(rate_qps, N, np.random.default_rng(1)), prepend=0.0)
    # Exponential gaps: std = mean = 1/rate, so the mean's SE is 1/(rate sqrt(n)).
    assert abs(gaps.mean() - 1 / rate_qps) < 5 / (rate_qps * math.sqrt(N))
    assert abs(gaps.std() / gaps.mean() - 1.0) < _cv_tolerance(1.0, N)
    assert np.all(gaps > 0)


@pytest.mark.parametrize("cv", [2.0, 0.5])
def test_gamma_gaps_have_requested_cv_and_mean(cv):
    rate_qps = 3.0
    gaps = np.diff(gamma_arrivals(rate_qps, cv, N, np.random.default_rng(2)), prepend=0.0)
    assert abs(gaps.mean() - 1 / rate_qps) < 5 * cv / (rate_qps * math.sqrt(N))
    assert abs(gaps.std() / gaps.mean() - cv) < _cv_tolerance(cv, N)


def test_static_arrivals_are_all_at_zero():
    arrivals = static_arrivals(7)
    assert arrivals.dtype == np.float64 and arrivals.shape == (7,) and not arrivals.any()


def test_zipf_frequencies_match_the_exact_pmf():
    theta, low, high, n = 1.2, 3, 60, 200_000
    counts = zipf(theta, low, high).sample(n, np.random.default_rng(3))
    support = np.arange(low, high + 1)
    pmf = support**-theta / np.sum(support**-theta)
    frequency = np.bincount(counts - low, minlength=len(support)) / n
    assert counts.dtype == np.int64 and counts.min() >= low and counts.max() <= high
    assert len(frequency) == len(support)
    assert np.all(np.abs(frequency - pmf) < 5 * np.sqrt(pmf * (1 - pmf) / n))


def test_uniform_includes_both_bounds_and_has_the_right_mean():
    low, high = 5, 14
    counts = uniform(low, high).sample(N, np.random.default_rng(4))
    assert counts.dtype == np.int64
    assert set(np.unique(counts)) == set(range(low, high + 1))
    sd = math.sqrt(((high - low + 1) ** 2 - 1) / 12)
    assert abs(counts.mean() - (low + high) / 2) < 5 * sd / math.sqrt(N)


def test_fixed_and_empirical_return_only_given_values():
    assert np.array_equal(fixed(64).sample(3, np.random.default_rng(0)), [64, 64, 64])
    values = [7, 300, 4096]
    drawn = empirical(values).sample(10_000, np.random.default_rng(5))
    assert drawn.dtype == np.int64
    assert set(np.unique(drawn)) == set(values)


def _synthetic(seed, rate_qps, arrival="poisson", cv=1.0):
    return make_requests(
        2_000, seed, rate_qps=rate_qps, arrival=arrival, cv=cv, prompt=zipf(0.8, 16, 4096), output=uniform(1, 512)
    )


def test_same_seed_gives_identical_requests_and_another_seed_does_not():
    first, again, other = _synthetic(7, 2.0), _synthetic(7, 2.0), _synthetic(8, 2.0)
    for name in ("arrival_s", "prompt_tokens", "output_tokens"):
        assert np.array_equal(getattr(first, name), getattr(again, name))
        assert not np.array_equal(getattr(first, name), getattr(other, name))
    assert len(first) == 2_000


def test_lengths_do_not_depend_on_rate_or_arrival_process():
    base = _synthetic(9, 1.0)
    for changed in (_synthetic(9, 50.0), _synthetic(9, 1.0, "gamma", 3.0)):
        assert np.array_equal(base.prompt_tokens, changed.prompt_tokens)
        assert np.array_equal(base.output_tokens, changed.output_tokens)
        assert not np.array_equal(base.arrival_s, changed.arrival_s)
    static = _synthetic(9, None, "static")
    assert np.array_equal(base.prompt_tokens, static.prompt_tokens)
    assert not static.arrival_s.any()


@pytest.mark.parametrize(
    ("name", "rows", "first"),
    [
        ("splitwise_conv.csv", 19_366, (0.0, 374, 44)),
        ("splitwise_code.csv", 8_819, (0.0, 4808, 10)),
        ("arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv", 28_257, (None, 3772, 54)),
    ],
)
def test_reference_traces_load_with_their_rows_and_first_request(name, rows, first):
    trace = load_trace(reference_trace(name))
    assert len(trace) == rows
    arrival, prompt, output = first
    assert (trace.prompt_tokens[0], trace.output_tokens[0]) == (prompt, output)
    if arrival is None:
        assert trace.arrival_s is None
    else:
        assert trace.arrival_s[0] == arrival and trace.arrival_s[-1] > 3000  # about an hour of traffic


def test_azure_trace_with_datetimes_gives_seconds_from_the_first_request(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9160491,396,0\n"
        "2023-11-16 18:16:01.0000000,879,12\n"
    )
    trace = load_trace(path)
    # 50.9160491 - 46.6805900 and 61.0 - 46.6805900, by hand.
    np.testing.assert_allclose(trace.arrival_s, [0.0, 4.2354591, 14.31941], rtol=0, atol=1e-9)
    assert trace.prompt_tokens.tolist() == [374, 396, 879]
    assert trace.output_tokens.tolist() == [44, 1, 12]  # a zero count becomes 1


def test_azure_trace_in_seconds_is_sorted_by_arrival(tmp_path):
    path = tmp_path / "azure_s.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n12.5,10,1\n10.0,20,2\n11.0,30,3\n")
    trace = load_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.0, 2.5]
    assert trace.prompt_tokens.tolist() == [20, 30, 10]


def test_unknown_layout_names_the_columns_found_and_accepted(tmp_path):
    path = tmp_path / "odd.csv"
    path.write_text("time,input,output\n0,1,1\n")
    with pytest.raises(SpecError) as error:
        load_trace(path)
    message = str(error.value)
    assert "\n" not in message
    assert "time, input, output" in message
    assert "TIMESTAMP+ContextTokens+GeneratedTokens" in message and "num_prefill_tokens+num_decode_tokens" in message


def test_max_tokens_takes_the_excess_from_both_sides_in_proportion(tmp_path):
    path = tmp_path / "lengths.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens\n4808,10\n1,10000\n100,50\n")
    trace = load_trace(path, max_tokens=4096)
    # Excess 722 over 4818: prompt loses ceil(722*4808/4818) = 721, output ceil(722*10/4818) = 2.
    # Excess 5905 over 10001: prompt loses ceil(5905/10001) = 1 (kept at 1), output ceil(59050000/10001) = 5905.
    assert trace.prompt_tokens.tolist() == [4087, 1, 100]
    assert trace.output_tokens.tolist() == [8, 4095, 50]
    capped = load_trace(reference_trace("splitwise_code.csv"), max_tokens=4096)
    assert (capped.prompt_tokens + capped.output_tokens).max() <= 4096
    assert capped.prompt_tokens.min() >= 1 and capped.output_tokens.min() >= 1


def _trace(arrivals):
    lengths = np.arange(1, 6, dtype=np.int64)
    return TraceData(arrivals, lengths * 10, lengths)


def test_trace_replay_and_resampled_arrivals_and_wrap_around():
    recorded = np.array([0.0, 0.5, 0.5, 2.0, 9.0])
    replay = make_requests(4, 0, rate_qps=None, trace=_trace(recorded))
    assert replay.arrival_s.tolist() == [0.0, 0.5, 0.5, 2.0]
    assert replay.prompt_tokens.tolist() == [10, 20, 30, 40]
    with pytest.raises(SpecError, match="^n: 6 exceeds the 5 requests"):
        make_requests(6, 0, rate_qps=None, trace=_trace(recorded))
    redrawn = make_requests(7, 0, rate_qps=100.0, trace=_trace(recorded))
    assert redrawn.output_tokens.tolist() == [1, 2, 3, 4, 5, 1, 2]
    assert redrawn.arrival_s[-1] < 1.0  # 7 gaps of mean 10 ms, not the recorded 9 s
    lengths_only = make_requests(7, 0, rate_qps=100.0, trace=_trace(None))
    assert np.array_equal(lengths_only.prompt_tokens, redrawn.prompt_tokens)
    assert np.array_equal(lengths_only.arrival_s, redrawn.arrival_s)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate_qps": 0.0}, "rate_qps"),
        ({"rate_qps": -1.0}, "rate_qps"),
        ({"rate_qps": 1.0, "arrival": "gamma", "cv": 0.0}, "cv"),
        ({"rate_qps": 1.0, "arrival": "bursty"}, "arrival"),
        ({"rate_qps": None}, "rate_qps"),
        ({"rate_qps": 1.0, "arrival": "static"}, "rate_qps"),
    ],
)
def test_bad_parameters_give_one_line_naming_the_field(kwargs, field):
    with pytest.raises(SpecError, match=f"^{field}: [^\n]*allowed") as error:
        make_requests(10, 0, prompt=fixed(8), output=fixed(8), **kwargs)
    assert "\n" not in str(error.value)


def test_bad_distributions_and_trace_sizes_are_rejected(tmp_path):
    with pytest.raises(SpecError, match="^uniform.low: 9 > high=3"):
        uniform(9, 3)
    with pytest.raises(SpecError, match="^zipf.low: 9 > high=3"):
        zipf(1.0, 9, 3)
    with pytest.raises(SpecError, match="^zipf.theta"):
        zipf(0.0, 1, 3)
    with pytest.raises(SpecError, match="^fixed.value"):
        fixed(0)
    with pytest.raises(SpecError, match="^empirical.values: 0"):
        empirical([3, 0])
    trace = tmp_path / "lengths.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n374,44\n")
    with pytest.raises(SpecError, match="^max_tokens"):
        load_trace(trace, max_tokens=1)


def test_requests_reject_unsorted_mistyped_or_ragged_columns():
    ones = np.ones(3, dtype=np.int64)
    with pytest.raises(SpecError, match=r"^requests.arrival_s: entry 2 \(1 s\) comes before entry 1"):
        Requests(np.array([0.0, 2.0, 1.0]), ones, ones)
    with pytest.raises(SpecError, match="^requests.prompt_tokens: float64"):
        Requests(np.zeros(3), np.ones(3), ones)
    with pytest.raises(SpecError, match="^requests.output_tokens: 2 entries"):
        Requests(np.zeros(3), ones, ones[:2])
    with pytest.raises(SpecError, match="^requests.output_tokens: 0 is not allowed"):
        Requests(np.zeros(3), ones, ones - 1)
