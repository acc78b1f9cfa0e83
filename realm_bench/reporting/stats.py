"""The statistics behind every table cell and claim: intervals over seeds, a paired bootstrap
over questions, and a permutation test of a rank correlation.

Why these and not others:
- Over seeds, a Student t-interval of the mean. A CPU budget allows 3-5 seeds; a bootstrap
  over 3 values has 10 distinct resamples and its percentile interval can never be wider than
  their range, so it claims far more certainty than 3 seeds carry. The t quantile (4.30 at 2
  degrees of freedom) says how little they do.
- Within a seed, a paired bootstrap over questions: two systems answered the same questions,
  so resampling questions (one draw for both) keeps their correlation, and the interval says
  how much the difference depends on which questions the split happens to hold (on 208 dev
  questions one standard error of EM is ~2.9 points). The statistic is a mean of
  per-question differences that take few values (-100, 0, +100), so resampling n questions is
  drawing how many of each value from a multinomial: B draws cost O(B), not O(B x n).
- Over a sweep, a rank correlation (Spearman's rho or Kendall's tau-b) of the metric against
  the swept parameter, with one-sided permutation p-values: exact (every ordering) when there
  are few points, Monte Carlo otherwise. A rank test asks only "does it go down", not "is it
  linear in log steps", which no one claims.

Every random draw comes from a generator seeded by `StatsConfig.seed` and the claim's name,
so the output is the same on every run and does not depend on the order claims are checked.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from typing import Sequence

import numpy as np
from scipy import stats as scipy_stats

from realm_bench.errors import InputError

CORRELATIONS = ("spearman", "kendall")


@dataclasses.dataclass(frozen=True)
class StatsConfig:
  """How intervals and p-values are computed. The defaults are what `check` and `tables` use;
  they are not command-line flags, so a check cannot be tuned until it passes."""
  confidence: float = 0.95
  bootstrap_samples: int = 2000
  # Orderings enumerated exactly up to this many (8 points: 40,320), else drawn at random.
  permutations: int = 50_000
  seed: int = 0

  def __post_init__(self):
    if not 0.5 <= self.confidence < 1:
      raise InputError(f"must be in [0.5, 1), got {self.confidence}",
                       field="StatsConfig.confidence")
    for name in ("bootstrap_samples", "permutations"):
      if getattr(self, name) < 100:
        raise InputError(f"must be at least 100, got {getattr(self, name)}",
                         field=f"StatsConfig.{name}")

  @property
  def alpha(self) -> float:
    return 1.0 - self.confidence

  def rng(self, *keys: str) -> np.random.Generator:
    """A generator of its own for each claim, so adding a claim changes no other's draws."""
    return np.random.default_rng([self.seed, *(zlib.crc32(k.encode()) for k in keys)])


@dataclasses.dataclass(frozen=True)
class Interval:
  low: float
  high: float
  method: str   # in words, for the output: "paired t over 3 seeds", ...


@dataclasses.dataclass(frozen=True)
class CellStat:
  """A table cell: the mean over runs, the half-width of its t-interval (NaN below 2 runs)."""
  mean: float | None
  half_width: float
  n: int


def _t_quantile(confidence: float, df: float) -> float:
  return float(scipy_stats.t.ppf(0.5 + confidence / 2, df))


def cell_stat(values: Sequence[float], *, confidence: float = 0.95) -> CellStat:
  x = np.asarray([v for v in values if v is not None and not math.isnan(v)], dtype=float)
  if not len(x):
    return CellStat(mean=None, half_width=math.nan, n=0)
  half = math.nan
  if len(x) >= 2:
    half = _t_quantile(confidence, len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
  return CellStat(mean=float(x.mean()), half_width=half, n=len(x))


def t_interval(values: Sequence[float], *, confidence: float, what: str) -> Interval | None:
  """The t-interval of the mean of `values` (None below two)."""
  stat = cell_stat(values, confidence=confidence)
  if stat.n < 2:
    return None
  return Interval(low=stat.mean - stat.half_width, high=stat.mean + stat.half_width,
                  method=f"t over {stat.n} {what}")


def welch_interval(a: Sequence[float], b: Sequence[float], *,
                   confidence: float) -> Interval | None:
  """Interval of mean(a) - mean(b) for unpaired runs (Welch-Satterthwaite degrees of freedom);
  None unless both sides have two runs or more."""
  a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
  if len(a) < 2 or len(b) < 2:
    return None
  va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
  se = math.sqrt(va + vb)
  df = (len(a) + len(b) - 2 if se == 0
        else (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)))
  d = float(a.mean() - b.mean())
  half = _t_quantile(confidence, df) * se
  return Interval(low=d - half, high=d + half,
                  method=f"Welch t over {len(a)} and {len(b)} runs (not paired by seed)")


def paired_bootstrap(differences: Sequence[np.ndarray], *, samples: int, confidence: float,
                     rng: np.random.Generator) -> Interval:
  """Percentile interval of the mean over seeds of each seed's mean per-question difference,
  each seed's questions resampled with replacement (both systems with the same draw)."""
  if not differences or any(len(d) == 0 for d in differences):
    raise ValueError("paired_bootstrap needs per-question differences for every seed")
  total = np.zeros(samples)
  for d in differences:
    values, counts = np.unique(np.asarray(d, dtype=float), return_counts=True)
    draws = rng.multinomial(len(d), counts / len(d), size=samples)
    total += draws @ values / len(d)
  total /= len(differences)
  low, high = np.quantile(total, [(1 - confidence) / 2, (1 + confidence) / 2])
  sizes = sorted({len(d) for d in differences})
  questions = "/".join(str(n) for n in sizes)
  return Interval(low=float(low), high=float(high),
                  method=f"paired bootstrap over {questions} questions x {len(differences)} "
                         f"seed(s), {samples} draws")


@dataclasses.dataclass(frozen=True)
class Trend:
  statistic: float        # rho or tau; NaN when either variable is constant
  p_decreasing: float     # P(statistic <= observed) over orderings of the metric
  p_increasing: float     # P(statistic >= observed)
  orderings: int          # how many orderings the p-values are over
  exact: bool


def _spearman(rx: np.ndarray, ys: np.ndarray) -> np.ndarray:
  """rho of the ranks rx against each row of ys (already ranks)."""
  cx = rx - rx.mean()
  cy = ys - ys.mean(axis=-1, keepdims=True)
  denominator = np.sqrt((cx ** 2).sum() * (cy ** 2).sum(axis=-1))
  with np.errstate(invalid="ignore", divide="ignore"):
    return (cy @ cx) / denominator


def _kendall(x: np.ndarray, ys: np.ndarray) -> np.ndarray:
  """tau-b of x against each row of ys (ties in either counted as tau-b does)."""
  i, j = np.triu_indices(len(x), k=1)
  sx = np.sign(x[i] - x[j])
  sy = np.sign(ys[..., i] - ys[..., j])
  denominator = np.sqrt(np.count_nonzero(sx) * np.count_nonzero(sy, axis=-1))
  with np.errstate(invalid="ignore", divide="ignore"):
    return (sy @ sx) / denominator


def rank_trend(x: Sequence[float], y: Sequence[float], *, correlation: str = "spearman",
               permutations: int = 50_000, rng: np.random.Generator | None = None) -> Trend:
  """The rank correlation of y with x, and its permutation p-values in both directions:
  under "no trend" every assignment of the y values to the x values is equally likely."""
  if correlation not in CORRELATIONS:
    raise ValueError(f"correlation must be one of {CORRELATIONS}, got {correlation!r}")
  x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
  k = len(x)
  exact = math.factorial(k) <= permutations
  if exact:
    orders = np.array(list(itertools.permutations(range(k))), dtype=np.intp)
  else:
    rng = rng if rng is not None else np.random.default_rng(0)
    orders = np.argsort(rng.random((permutations, k)), axis=1)
  if correlation == "spearman":
    ry = scipy_stats.rankdata(y)
    observed = float(_spearman(scipy_stats.rankdata(x), ry[None, :])[0])
    null = _spearman(scipy_stats.rankdata(x), ry[orders])
  else:
    observed = float(_kendall(x, y[None, :])[0])
    null = _kendall(x, y[orders])
  if math.isnan(observed):
    return Trend(statistic=math.nan, p_decreasing=1.0, p_increasing=1.0,
                 orderings=len(orders), exact=exact)
  eps = 1e-12
  low, high = np.count_nonzero(null <= observed + eps), np.count_nonzero(null >= observed - eps)
  if exact:
    p_dec, p_inc = low / len(null), high / len(null)
  else:   # the observed ordering counts as one of the draws
    p_dec, p_inc = (low + 1) / (len(null) + 1), (high + 1) / (len(null) + 1)
  return Trend(statistic=observed, p_decreasing=float(p_dec), p_increasing=float(p_inc),
               orderings=len(orders), exact=exact)
