"""Deciding a claim from run records: PASS, FAIL or INCONCLUSIVE from an interval, never from
two single numbers (on a 208-question dev split one standard error is ~2.9 EM points, so "A
above B by one point" on one seed says nothing).

A pairwise claim ("REALM above ORQA") is decided by the 95% interval of the difference of the
two sides' means. Two sources of noise are in that difference, and the interval spans both:
- seeds: runs of the two sides in the same seed's folder (`replicate`, see collect.py) are
  paired, and the t-interval of their per-seed differences is taken; sides that cannot be
  paired one-to-one get Welch's interval over their runs instead;
- questions: when every paired seed's two records carry per-question outcomes on the same
  questions, a paired bootstrap over those questions (stats.paired_bootstrap); otherwise the
  verdict says so and rests on the interval over seeds.
PASS when the whole interval lies above the claim's margin (0 unless the spec says), FAIL when
it lies below, INCONCLUSIVE when it straddles it or when there is no interval at all (one run a
side and no outcomes). Taking the span of both intervals is conservative on purpose: a claim
passes only if neither the seed nor the question sample could explain it.

A trend claim ("EM decreases with the refresh interval") is decided by the rank correlation of
the metric's per-point means (over seeds, as the sweep table shows them) with the swept
parameter, and its one-sided permutation p-value (stats.rank_trend).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from realm_bench.reporting import stats
from realm_bench.reporting.specs import Claim, TrendClaim


def _outcome_points(text) -> np.ndarray | None:
  if not isinstance(text, str):
    return None
  return (np.frombuffer(text.encode(), np.uint8) - ord("0")).astype(float) * 100.0


def _paired(better: pd.DataFrame, worse: pd.DataFrame) -> pd.DataFrame | None:
  """One row per seed with both sides' value and outcomes, if every run of either side has
  exactly one counterpart in its seed's folder; else None (the runs are not paired)."""
  if not (better["replicate"].is_unique and worse["replicate"].is_unique
          and set(better["replicate"]) == set(worse["replicate"])):
    return None
  return better.set_index("replicate")[["value", "outcomes"]].join(
      worse.set_index("replicate")[["value", "outcomes"]], lsuffix="_better",
      rsuffix="_worse").sort_index()


def _question_differences(paired: pd.DataFrame) -> list[np.ndarray] | None:
  """Each seed's per-question differences (points), if every seed has outcomes for both
  sides over the same number of questions."""
  out = []
  for row in paired.itertuples():
    a, b = _outcome_points(row.outcomes_better), _outcome_points(row.outcomes_worse)
    if a is None or b is None or len(a) != len(b):
      return None
    out.append(a - b)
  return out


def verdict(low: float, high: float, margin: float = 0.0) -> str:
  """A pairwise claim's verdict from the interval of its difference: wholly above the margin
  passes, wholly below fails, one that holds it decides nothing."""
  if low > margin:
    return "PASS"
  if high < margin:
    return "FAIL"
  return "INCONCLUSIVE"


def judge_pairwise(claim: Claim, better: pd.DataFrame, worse: pd.DataFrame, *,
                   config: stats.StatsConfig, key: str) -> dict:
  """The verdict fields of one pairwise claim on one scale; both frames are non-empty rows of
  `collect.select` (columns value, replicate, outcomes). `key` seeds the bootstrap."""
  delta = float(better["value"].mean() - worse["value"].mean())
  intervals, note = [], ""
  paired = _paired(better, worse)
  if paired is not None:
    per_seed = paired["value_better"] - paired["value_worse"]
    seeds = stats.t_interval(per_seed.tolist(), confidence=config.confidence,
                             what="seeds (paired)")
    differences = _question_differences(paired)
    intervals = [seeds] if seeds is not None else []
    if differences is not None:
      intervals.append(stats.paired_bootstrap(
          differences, samples=config.bootstrap_samples, confidence=config.confidence,
          rng=config.rng(key)))
      if seeds is None:
        note = "one seed: interval over its questions only"
    elif seeds is not None:
      note = "no per-question outcomes in every seed's records: interval over seeds only"
    else:
      note = "one seed and no per-question outcomes: no interval"
  else:
    welch = stats.welch_interval(better["value"].tolist(), worse["value"].tolist(),
                                 confidence=config.confidence)
    intervals = [welch] if welch is not None else []
    note = ("runs not paired one-to-one by seed folder: no bootstrap over questions"
            + ("" if welch is not None else ", and under 2 runs a side: no interval"))
  if not intervals:
    return {"delta": delta, "ci_low": None, "ci_high": None, "p_value": None, "method": "",
            "note": note, "verdict": "INCONCLUSIVE"}
  low, high = min(i.low for i in intervals), max(i.high for i in intervals)
  return {"delta": delta, "ci_low": low, "ci_high": high, "p_value": None,
          "method": " + ".join(i.method for i in intervals), "note": note,
          "verdict": verdict(low, high, claim.margin)}


def trend_points(rows: pd.DataFrame, param: str) -> pd.DataFrame:
  """Per value of `params.<param>`: the metric's mean over runs and how many runs."""
  column = f"params.{param}"
  points = rows.groupby(column, sort=True)["value"].agg(["mean", "count"]).reset_index()
  return points.rename(columns={column: "x"})


def judge_trend(claim: TrendClaim, rows: pd.DataFrame, *, config: stats.StatsConfig,
                key: str) -> dict:
  """The verdict fields of one trend claim on one scale, from its non-empty rows."""
  points = trend_points(rows, claim.param)
  x = pd.to_numeric(points["x"], errors="coerce")
  k = len(points)
  name = "Spearman rho" if claim.correlation == "spearman" else "Kendall tau-b"
  base = {"delta": None, "ci_low": None, "ci_high": None}
  if x.isna().any() or k < 3:
    why = ("the swept parameter is not numeric" if x.isna().any()
           else f"{k} sweep point(s): a rank correlation needs 3 or more")
    return {**base, "ours": None, "p_value": None, "method": name, "note": why,
            "verdict": "INCONCLUSIVE"}
  trend = stats.rank_trend(x.to_numpy(float), points["mean"].to_numpy(float),
                           correlation=claim.correlation, permutations=config.permutations,
                           rng=config.rng(key))
  claimed, other = ((trend.p_decreasing, trend.p_increasing) if claim.direction == "decreasing"
                    else (trend.p_increasing, trend.p_decreasing))
  notes = []
  if math.isnan(trend.statistic):
    notes.append("the metric is the same at every point")
  if 1 / math.factorial(k) > config.alpha:
    notes.append(f"with {k} points the smallest possible p is 1/{k}! = "
                 f"{1 / math.factorial(k):.3f}: it cannot pass")
  decided = ("PASS" if claimed <= config.alpha else "FAIL" if other <= config.alpha
             else "INCONCLUSIVE")
  how = "exact over all" if trend.exact else "Monte Carlo over"
  return {**base, "ours": None if math.isnan(trend.statistic) else trend.statistic,
          "p_value": claimed,
          "method": f"{name} over {k} points (per-point means), one-sided permutation p "
                    f"({how} {trend.orderings} orderings)",
          "note": "; ".join(notes), "verdict": decided}
