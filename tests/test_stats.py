"""The statistics of `check` and the tables, against scipy's own implementations."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from realm_bench.errors import InputError
from realm_bench.reporting import stats


def test_cell_stat_is_the_t_interval_over_runs():
  cell = stats.cell_stat([10.0, 12.0, 14.0])
  assert cell.mean == 12.0 and cell.n == 3
  assert cell.half_width == pytest.approx(scipy_stats.t.ppf(0.975, 2) * 2.0 / math.sqrt(3))
  one = stats.cell_stat([10.0])
  assert one.mean == 10.0 and one.n == 1 and math.isnan(one.half_width)
  assert stats.cell_stat([]).mean is None


def test_welch_interval_matches_scipy():
  a, b = [31.0, 35.5, 33.2, 30.1], [28.0, 29.5, 33.0]
  ours = stats.welch_interval(a, b, confidence=0.95)
  theirs = scipy_stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
  assert (ours.low, ours.high) == pytest.approx((theirs.low, theirs.high))
  assert stats.welch_interval([1.0], b, confidence=0.95) is None


def test_paired_bootstrap_is_resampling_questions():
  rng = np.random.default_rng(1)
  a = (rng.random(300) < 0.5).astype(float) * 100
  b = (rng.random(300) < 0.4).astype(float) * 100
  d = a - b
  got = stats.paired_bootstrap([d], samples=4000, confidence=0.95,
                               rng=np.random.default_rng(7))
  # The same statistic by resampling question indices.
  draws = np.random.default_rng(8).integers(0, len(d), size=(4000, len(d)))
  low, high = np.quantile(d[draws].mean(axis=1), [0.025, 0.975])
  assert got.low == pytest.approx(low, abs=0.8) and got.high == pytest.approx(high, abs=0.8)
  assert got.low < d.mean() < got.high
  # Seeded: the same generator seed gives the same interval.
  again = stats.paired_bootstrap([d], samples=4000, confidence=0.95,
                                 rng=np.random.default_rng(7))
  assert again == got
  same = stats.paired_bootstrap([np.zeros(50)], samples=500, confidence=0.95,
                                rng=np.random.default_rng(0))
  assert (same.low, same.high) == (0.0, 0.0)


@pytest.mark.parametrize("y", [[40.0, 38.0, 39.0, 30.0, 31.0], [1.0, 1.0, 2.0, 0.5, 3.0]])
def test_rank_trend_p_values_match_scipys_permutation_test(y):
  x = [1, 3, 10, 30, 100]
  got = stats.rank_trend(x, y, correlation="spearman")
  assert got.exact and got.orderings == 120
  assert got.statistic == pytest.approx(scipy_stats.spearmanr(x, y).statistic)
  for alternative, p in (("less", got.p_decreasing), ("greater", got.p_increasing)):
    theirs = scipy_stats.permutation_test(
        (y,), lambda v: scipy_stats.spearmanr(x, v).statistic, permutation_type="pairings",
        alternative=alternative, n_resamples=np.inf)
    assert p == pytest.approx(theirs.pvalue)
  tau = stats.rank_trend(x, y, correlation="kendall")
  assert tau.statistic == pytest.approx(scipy_stats.kendalltau(x, y).statistic)


def test_rank_trend_smallest_p_and_monte_carlo():
  perfect = stats.rank_trend([1, 3, 10, 30], [4.0, 3.0, 2.0, 1.0])
  assert perfect.statistic == -1.0 and perfect.p_decreasing == pytest.approx(1 / 24)
  assert perfect.p_increasing == 1.0
  flat = stats.rank_trend([1, 3, 10], [2.0, 2.0, 2.0])
  assert math.isnan(flat.statistic) and flat.p_decreasing == 1.0
  x = np.arange(12)
  mc = stats.rank_trend(x, -x.astype(float), permutations=1000,
                        rng=np.random.default_rng(0))
  assert not mc.exact and mc.p_decreasing == pytest.approx(1 / 1001)
  again = stats.rank_trend(x, -x.astype(float), permutations=1000,
                           rng=np.random.default_rng(0))
  assert again == mc


def test_stats_config_is_checked():
  with pytest.raises(InputError) as e:
    stats.StatsConfig(confidence=1.5)
  assert e.value.field == "StatsConfig.confidence"
  with pytest.raises(InputError):
    stats.StatsConfig(bootstrap_samples=3)
  a, b = stats.StatsConfig().rng("x"), stats.StatsConfig().rng("x")
  assert a.random() == b.random() != stats.StatsConfig().rng("y").random()
