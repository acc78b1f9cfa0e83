"""`realm-bench check`: does what we ran agree with the paper?

Two kinds of verdict. A paper-scale cell is OK within its tolerance of the printed number,
OK~ within twice it (still a pass: a reproduction that close is a reproduction), FAIL beyond,
MISSING without a record. A claim ("REALM above ORQA", "EM decreases with the refresh
interval") is judged on the records of its own scale, so the synthetic world can confirm the
paper's directions without ever being compared with the paper's numbers, and it is decided by
an interval over seeds and questions, or a rank test over a sweep (claims.py): PASS, FAIL,
INCONCLUSIVE, or MISSING without records. Exit code 1 on any FAIL (and on MISSING or
INCONCLUSIVE under --strict) lets CI gate on it; a runs folder that does not exist or holds no
records is an input error (exit 2), since a misspelt `--runs` in CI must not make the gate
pass. `check_output` writes the verdicts as JSON or JUnit XML.
"""
from __future__ import annotations

import math

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting import claims as claims_lib
from realm_bench.reporting.build import load_frame
from realm_bench.reporting.collect import collect_records, select
from realm_bench.reporting.records import SCALES
from realm_bench.reporting.specs import (Claim, Spec, TableSpec, TrendClaim, load_reported,
                                         load_specs)
from realm_bench.reporting.stats import StatsConfig, cell_stat

# ours_pm / baseline_pm: half-width of the 95% t-interval over runs of that side (NaN below
# two runs); ci_low / ci_high: a claim's interval of the difference; p_value: a trend's.
COLUMNS = ("spec", "kind", "item", "description", "scale", "reported", "ours", "ours_pm",
           "baseline", "baseline_pm", "delta", "ci_low", "ci_high", "p_value", "tol", "n",
           "method", "note", "verdict")
PASSING = ("OK", "OK~", "PASS")
NOT_DECIDED = ("MISSING", "INCONCLUSIVE")   # what --strict turns into a failure
# Differences are of numbers printed to 0.1; a hair of slack keeps |38.2+1.5-38.2| <= 1.5 true.
_EPS = 1e-9


def _cell_verdict(delta: float, tol: float) -> str:
  if abs(delta) <= tol + _EPS:
    return "OK"
  if abs(delta) <= 2 * tol + _EPS:
    return "OK~"
  return "FAIL"


def _blank() -> dict:
  return {c: None for c in COLUMNS}


def _cells(spec: TableSpec, reported, frame, config) -> list[dict]:
  out = []
  for row in spec.rows:
    if not row.experiment:
      continue
    for col in spec.columns:
      cell = reported.get((spec.reported_table, row.row, col.dataset, col.split, col.metric))
      if cell is None:
        continue
      ours = cell_stat(select(
          frame, experiment=row.experiment, scale="paper", dataset=col.dataset, split=col.split,
          metric=col.metric, table=spec.reported_table, row=row.row)["value"].tolist(),
          confidence=config.confidence)
      delta = None if ours.mean is None else ours.mean - cell.value
      out.append({
          **_blank(), "spec": spec.id, "kind": "cell",
          "item": f"{spec.reported_table}#{row.row} {col.name} {row.experiment}",
          "description": f"{row.label}: {col.dataset} {col.split} {col.metric}",
          "scale": "paper", "reported": cell.value, "ours": ours.mean,
          "ours_pm": ours.half_width, "delta": delta, "tol": cell.tolerance, "n": ours.n,
          "method": "mean over runs, t-interval", "note": "",
          "verdict": "MISSING" if delta is None else _cell_verdict(delta, cell.tolerance)})
  return out


def _rows(frame, claim, scale, table, experiment, params=None):
  return select(frame, experiment=experiment, params=params, scale=scale,
                dataset=claim.dataset, split=claim.split, metric=claim.metric, table=table)


def _pairwise(spec: Spec, claim: Claim, frame, config) -> list[dict]:
  base = {**_blank(), "spec": spec.id, "kind": "claim", "item": f"{spec.id}/{claim.id}",
          "description": f"{claim.text}: {claim.better.describe()} > "
                         f"{claim.worse.describe()} on {claim.dataset} {claim.split} "
                         f"{claim.metric}",
          "tol": claim.margin}
  judged, partial = [], None
  for scale in (SCALES if claim.scale == "any" else (claim.scale,)):
    better = _rows(frame, claim, scale, spec.reported_table, claim.better.experiment,
                   claim.better.params)
    worse = _rows(frame, claim, scale, spec.reported_table, claim.worse.experiment,
                  claim.worse.params)
    b = cell_stat(better["value"].tolist(), confidence=config.confidence)
    w = cell_stat(worse["value"].tolist(), confidence=config.confidence)
    row = {**base, "scale": scale, "ours": b.mean, "ours_pm": b.half_width,
           "baseline": w.mean, "baseline_pm": w.half_width, "n": min(b.n, w.n)}
    if b.n and w.n:
      judged.append({**row, **claims_lib.judge_pairwise(
          claim, better, worse, config=config, key=f"{spec.id}/{claim.id}/{scale}")})
    elif partial is None or b.n + w.n:
      partial = {**row, "method": "", "note": "no records on "
                 + ("either side" if not b.n + w.n else "one side"), "verdict": "MISSING"}
  if judged:
    return judged
  return [{**partial, "scale": claim.scale}]


def _trend(spec: Spec, claim: TrendClaim, frame, config) -> list[dict]:
  arrow = "falls" if claim.direction == "decreasing" else "rises"
  base = {**_blank(), "spec": spec.id, "kind": "claim", "item": f"{spec.id}/{claim.id}",
          "description": f"{claim.text}: {claim.metric} of {claim.experiment} on "
                         f"{claim.dataset} {claim.split} {arrow} as params.{claim.param} "
                         f"grows",
          "tol": None}
  judged = []
  for scale in (SCALES if claim.scale == "any" else (claim.scale,)):
    rows = _rows(frame, claim, scale, spec.reported_table, claim.experiment)
    if rows.empty:
      continue
    column = f"params.{claim.param}"
    if column not in rows.columns or rows[column].isna().any():
      bad = rows if column not in rows.columns else rows[rows[column].isna()]
      raise InputError(f"a {claim.experiment!r} run must record the swept parameter",
                       path=bad["path"].iloc[0], field=column)
    counts = claims_lib.trend_points(rows, claim.param)["count"]
    judged.append({**base, "scale": scale, "n": int(counts.min()), **claims_lib.judge_trend(
        claim, rows, config=config, key=f"{spec.id}/{claim.id}/{scale}")})
  if judged:
    return judged
  return [{**base, "scale": claim.scale, "n": 0, "method": "", "note": "no sweep records",
           "verdict": "MISSING"}]


def verdicts_for(*, frame: pd.DataFrame, specs, reported,
                 config: StatsConfig = StatsConfig()) -> pd.DataFrame:
  """One row per checkable cell and claim of `specs` (the COLUMNS), from the records frame."""
  rows = []
  for spec in specs:
    if isinstance(spec, TableSpec):
      rows += _cells(spec, reported, frame, config)
    for claim in spec.claims:
      judge = _trend if isinstance(claim, TrendClaim) else _pairwise
      rows += judge(spec, claim, frame, config)
  verdicts = pd.DataFrame(rows, columns=list(COLUMNS))
  verdicts["n"] = verdicts["n"].astype(int)
  return verdicts


def _pick_specs(specs: list[Spec], spec_ids) -> list[Spec]:
  unknown = [name for name in spec_ids if name not in {s.id for s in specs}]
  if unknown:
    raise InputError(f"no spec {unknown[0]!r}; the specs are {', '.join(s.id for s in specs)}",
                     field="--spec")
  return [s for s in specs if not spec_ids or s.id in spec_ids]


def exit_code(verdicts: pd.DataFrame, *, strict: bool) -> int:
  """1 on a FAIL, and under `strict` on a MISSING or INCONCLUSIVE too; else 0."""
  failed = verdicts["verdict"].eq("FAIL").any()
  undecided = verdicts["verdict"].isin(NOT_DECIDED).any()
  return int(bool(failed or (strict and undecided)))


def check(*, runs_dir, strict: bool = False, specs_dir=None, reported_path=None,
          spec_ids=(), require_records: bool = False,
          config: StatsConfig = StatsConfig()) -> tuple[int, pd.DataFrame]:
  """Verdicts for every checkable cell and claim (of the specs named by `spec_ids`, or all),
  and the exit code they add up to. `require_records` (the command line's gate) refuses a runs
  folder that is missing or holds no record; the library default treats it as no runs yet."""
  reported = load_reported(reported_path)
  specs = _pick_specs(load_specs(specs_dir, reported), spec_ids)
  if require_records:
    frame = collect_records(runs_dir)   # InputError when the folder does not exist
    if frame.empty:
      raise InputError("holds no run records (record.json); check the --runs path",
                       path=runs_dir)
  else:
    frame = load_frame(runs_dir)
  verdicts = verdicts_for(frame=frame, specs=specs, reported=reported, config=config)
  return exit_code(verdicts, strict=strict), verdicts


def _missing(value) -> bool:
  return value is None or isinstance(value, float) and math.isnan(value)


def _fmt(value, signed=False) -> str:
  if _missing(value):
    return "—"
  return f"{value:+.1f}" if signed else f"{value:.1f}"


def fmt_mean(mean, pm) -> str:
  """"12.3 ± 1.4", or "12.3" when there is no interval (one run)."""
  if _missing(mean):
    return "—"
  return _fmt(mean) if _missing(pm) else f"{mean:.1f} ± {pm:.1f}"


def fmt_interval(low, high) -> str:
  return "—" if _missing(low) or _missing(high) else f"[{low:+.2f}, {high:+.2f}]"


def _ours(row) -> str:
  if row["kind"] == "cell":
    return fmt_mean(row["ours"], row["ours_pm"])
  if _missing(row["tol"]):   # a trend claim: its rank correlation
    return "—" if _missing(row["ours"]) else f"r {row['ours']:+.2f}"
  return (f"{fmt_mean(row['ours'], row['ours_pm'])} vs "
          f"{fmt_mean(row['baseline'], row['baseline_pm'])}")


def _tol(row) -> str:
  if row["kind"] == "cell":
    return _fmt(row["tol"])
  return "p<=0.05" if _missing(row["tol"]) else f">{row['tol']:g}"


def format_verdicts(verdicts: pd.DataFrame, *, verbose: bool = False) -> str:
  """The verdicts as a text table, then how each claim was decided (and why not, when it was
  not); MISSING rows are folded into one count unless verbose."""
  missing = verdicts["verdict"].eq("MISSING")
  folded = "" if verbose or not missing.any() else (
      f"\n({int(missing.sum())} MISSING row(s) without records not shown; --verbose lists "
      f"them)")
  if not verbose:
    verdicts = verdicts[~missing]
  if verdicts.empty:
    return "(no verdict has records)" + folded
  rows = verdicts.to_dict(orient="records")
  shown = pd.DataFrame({
      "verdict": [r["verdict"] for r in rows],
      "item": [r["item"] for r in rows],
      "scale": [r["scale"] for r in rows],
      "reported": [_fmt(r["reported"]) for r in rows],
      "ours": [_ours(r) for r in rows],
      "Δ": [_fmt(r["delta"], signed=True) for r in rows],
      "95% interval": [fmt_interval(r["ci_low"], r["ci_high"]) for r in rows],
      "p": ["—" if _missing(r["p_value"]) else f"{r['p_value']:.3f}" for r in rows],
      "tol": [_tol(r) for r in rows],
      "n": [int(r["n"]) for r in rows],
      "what": [r["description"] for r in rows],
  })
  widths = {c: max(len(c), *(len(str(v)) for v in shown[c])) for c in shown.columns}
  lines = ["  ".join(str(v).ljust(widths[c]) for c, v in zip(shown.columns, values)).rstrip()
           for values in [shown.columns, *shown.itertuples(index=False)]]
  how = [f"  {r['item']} [{r['scale']}]: " + "; ".join(t for t in (r["method"], r["note"]) if t)
         for r in rows if r["kind"] == "claim" and r["verdict"] != "MISSING"]
  if how:
    lines += ["", "how each claim was decided (n = runs per side, or per sweep point):", *how]
  return "\n".join(lines) + folded


def format_summary(verdicts: pd.DataFrame, *, code: int, strict: bool) -> str:
  parts = []
  for kind, names in (("cells", ("OK", "OK~", "FAIL", "MISSING")),
                      ("claims", ("PASS", "FAIL", "INCONCLUSIVE", "MISSING"))):
    counts = verdicts[verdicts["kind"] == kind[:-1]]["verdict"].value_counts()
    parts.append(f"{kind}: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in names))
  mode = " (--strict: MISSING and INCONCLUSIVE fail)" if strict else ""
  return f"check: {'; '.join(parts)}{mode} -> exit {code}"
