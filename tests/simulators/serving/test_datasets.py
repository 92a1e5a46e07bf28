"""The catalogued benchmark length distributions and the geometric law behind them.

Statistical checks draw n = 200k lengths and allow 5 standard errors of the estimator (a false
failure is a < 1e-6 event); the expected values are closed forms, not the sampler's own tables.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.serving import geometric, get_dataset, uniform
from simulators.serving._datasets import datasets

N = 200_000


def truncated_geometric_mean(q: float, low: int, high: int) -> float:
    """Mean of P(k) proportional to q^k on low..high: low + q/(1-q) - L q^L/(1-q^L), L = high-low+1."""
    span = high - low + 1
    return low + q / (1 - q) - span * q**span / (1 - q**span)


def test_geometric_pmf_is_geometric_with_the_stated_mean():
    dist = geometric(294.45, 1, 1024)
    support, p = dist.pmf()
    ratios = p[1:] / p[:-1]
    assert np.allclose(ratios, ratios[0], rtol=1e-9)  # P(k+1)/P(k) = q everywhere
    assert support[0] == 1 and support[-1] == 1024
    assert truncated_geometric_mean(ratios[0], 1, 1024) == pytest.approx(294.45, rel=1e-9)


@pytest.mark.parametrize("mean", [294.45, 144.84])
def test_geometric_samples_match_mean_and_percentiles(mean):
    dist = geometric(mean, 1, 1024)
    q = dist.pmf()[1][1] / dist.pmf()[1][0]
    x = dist.sample(N, np.random.default_rng(7))
    assert x.min() >= 1 and x.max() <= 1024
    # Variance in closed form from the second moment of the same law, summed directly.
    k = np.arange(1, 1025, dtype=float)
    w = q ** (k - 1)
    w /= w.sum()
    sd = math.sqrt(w @ k**2 - (w @ k) ** 2)
    assert abs(x.mean() - mean) < 5 * sd / math.sqrt(N)
    # Percentiles: the CDF of the law at k is (1 - q^(k-low+1)) / (1 - q^L); the share of draws
    # at or below the 50th and 99th percentile points is within 5 binomial SEs of the target.
    for target in (0.5, 0.99):
        point = math.ceil(math.log(1 - target * (1 - q**1024)) / math.log(q))  # smallest k with CDF >= target
        share = (x <= point).mean()
        cdf = (1 - q**point) / (1 - q**1024)
        assert abs(share - cdf) < 5 * math.sqrt(cdf * (1 - cdf) / N)
        assert cdf >= target > (1 - q ** (point - 1)) / (1 - q**1024)


def test_geometric_refuses_a_mean_outside_its_bounds():
    with pytest.raises(SpecError, match="geometric.mean"):
        geometric(2000.0, 1, 1024)


def test_mlperf_llama2_set_is_the_published_figures():
    """Sources (datasets.yaml): prompts < 1024 tokens (processorca.py), output <= 1024
    (max_new_tokens) with reference mean 294.45 (README), 24,576 samples."""
    dataset = get_dataset("OpenOrca (MLPerf llama2-70b set, 24576 samples)")
    prompt, output = dataset.lengths()
    assert dataset.samples == 24576
    assert prompt == uniform(1, 1023)
    assert output == geometric(294.45, 1, 1024)
    x = prompt.sample(N, np.random.default_rng(3))
    sd = math.sqrt((1023**2 - 1) / 12)  # discrete uniform on 1..1023
    assert abs(x.mean() - 512) < 5 * sd / math.sqrt(N)


def test_every_catalogued_set_states_source_and_assumption():
    for name, dataset in datasets().items():
        assert dataset.source and dataset.assumption, name
        prompt, output = dataset.lengths()
        assert prompt.sample(10, np.random.default_rng(0)).min() >= 1
        assert output.sample(10, np.random.default_rng(0)).min() >= 1


def test_unknown_set_names_the_catalogue():
    with pytest.raises(SpecError, match="allowed: mlperf-llama2-70b-openorca"):
        get_dataset("sharegpt")
