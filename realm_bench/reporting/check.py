"""`realm-bench check`: does what we ran agree with the paper?

Two kinds of verdict. A paper-scale cell is OK within its tolerance of the printed number,
OK~ within twice it (still a pass: a reproduction that close is a reproduction), FAIL beyond,
MISSING without a record. A claim ("REALM above ORQA") is judged on the records of its own
scale, so the synthetic world can confirm the paper's directions without ever being compared
with the paper's numbers. Exit code 1 on any FAIL (and on MISSING under --strict) lets CI gate
on it; a runs folder that does not exist or holds no records is an input error (exit 2), since
a misspelt `--runs` in CI must not make the gate pass. `check_output` writes the verdicts as
JSON or JUnit XML.
"""
from __future__ import annotations

import math

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting.build import load_frame
from realm_bench.reporting.collect import collect_records, mean_and_count, select
from realm_bench.reporting.records import SCALES
from realm_bench.reporting.specs import Claim, Spec, TableSpec, load_reported, load_specs

COLUMNS = ("spec", "kind", "item", "description", "scale", "reported", "ours", "baseline", "delta",
           "tol", "n", "verdict")
PASSING = ("OK", "OK~", "PASS")
# Differences are of numbers printed to 0.1; a hair of slack keeps |38.2+1.5-38.2| <= 1.5 true.
_EPS = 1e-9


def _cell_verdict(delta: float, tol: float) -> str:
  if abs(delta) <= tol + _EPS:
    return "OK"
  if abs(delta) <= 2 * tol + _EPS:
    return "OK~"
  return "FAIL"


def _cells(spec: TableSpec, reported, frame) -> list[dict]:
  out = []
  for row in spec.rows:
    if not row.experiment:
      continue
    for col in spec.columns:
      cell = reported.get((spec.reported_table, row.row, col.dataset, col.split, col.metric))
      if cell is None:
        continue
      ours, n = mean_and_count(select(
          frame, experiment=row.experiment, scale="paper", dataset=col.dataset, split=col.split,
          metric=col.metric, table=spec.reported_table, row=row.row)["value"])
      delta = None if ours is None else ours - cell.value
      out.append({
          "spec": spec.id, "kind": "cell", "item": f"{spec.reported_table}#{row.row} {col.name} {row.experiment}",
          "description": f"{row.label}: {col.dataset} {col.split} {col.metric}",
          "scale": "paper", "reported": cell.value, "ours": ours, "baseline": None,
          "delta": delta, "tol": cell.tolerance, "n": n,
          "verdict": "MISSING" if delta is None else _cell_verdict(delta, cell.tolerance)})
  return out


def _claim(spec: Spec, claim: Claim, frame) -> list[dict]:
  def side_mean(side, scale):
    return mean_and_count(select(
        frame, experiment=side.experiment, params=side.params, scale=scale,
        dataset=claim.dataset, split=claim.split, metric=claim.metric,
        table=spec.reported_table)["value"])

  base = {"spec": spec.id, "kind": "claim", "item": f"{spec.id}/{claim.id}",
          "description": f"{claim.text}: {claim.better.describe()} > "
                         f"{claim.worse.describe()} on {claim.dataset} {claim.split} "
                         f"{claim.metric}",
          "reported": None, "tol": claim.margin}
  judged, partial = [], None
  for scale in (SCALES if claim.scale == "any" else (claim.scale,)):
    (better, n_better), (worse, n_worse) = side_mean(claim.better, scale), side_mean(
        claim.worse, scale)
    row = {**base, "scale": scale, "ours": better, "baseline": worse,
           "n": min(n_better, n_worse)}
    if n_better and n_worse:
      delta = better - worse
      judged.append({**row, "delta": delta,
                     "verdict": "PASS" if delta > claim.margin + _EPS else "FAIL"})
    elif partial is None or n_better + n_worse:
      partial = {**row, "delta": None, "verdict": "MISSING"}
  if judged:
    return judged
  return [{**partial, "scale": claim.scale}]


def _pick_specs(specs: list[Spec], spec_ids) -> list[Spec]:
  unknown = [name for name in spec_ids if name not in {s.id for s in specs}]
  if unknown:
    raise InputError(f"no spec {unknown[0]!r}; the specs are {', '.join(s.id for s in specs)}",
                     field="--spec")
  return [s for s in specs if not spec_ids or s.id in spec_ids]


def check(*, runs_dir, strict: bool = False, specs_dir=None, reported_path=None,
          spec_ids=(), require_records: bool = False) -> tuple[int, pd.DataFrame]:
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
  rows = []
  for spec in specs:
    if isinstance(spec, TableSpec):
      rows += _cells(spec, reported, frame)
    for claim in spec.claims:
      rows += _claim(spec, claim, frame)
  verdicts = pd.DataFrame(rows, columns=list(COLUMNS))
  failed = verdicts["verdict"].eq("FAIL").any()
  missing = verdicts["verdict"].eq("MISSING").any()
  return int(bool(failed or (strict and missing))), verdicts


def _fmt(value, signed=False) -> str:
  if value is None or isinstance(value, float) and math.isnan(value):
    return "—"
  return f"{value:+.1f}" if signed else f"{value:.1f}"


def format_verdicts(verdicts: pd.DataFrame, *, verbose: bool = False) -> str:
  """The verdicts as a text table; MISSING rows are folded into one count unless verbose."""
  missing = verdicts["verdict"].eq("MISSING")
  folded = "" if verbose or not missing.any() else (
      f"\n({int(missing.sum())} MISSING row(s) without records not shown; --verbose lists "
      f"them)")
  if not verbose:
    verdicts = verdicts[~missing]
  if verdicts.empty:
    return "(no verdict has records)" + folded
  shown = pd.DataFrame({
      "verdict": verdicts["verdict"],
      "item": verdicts["item"],
      "scale": verdicts["scale"],
      "reported": [_fmt(v) for v in verdicts["reported"]],
      "ours": [_fmt(o) if k == "cell" else f"{_fmt(o)} vs {_fmt(b)}"
               for k, o, b in zip(verdicts["kind"], verdicts["ours"], verdicts["baseline"])],
      "Δ": [_fmt(v, signed=True) for v in verdicts["delta"]],
      "tol": [_fmt(v) if k == "cell" else f">{v:g}"
              for k, v in zip(verdicts["kind"], verdicts["tol"])],
      "n": verdicts["n"].astype(int),
      "what": verdicts["description"],
  })
  widths = {c: max(len(c), *(len(str(v)) for v in shown[c])) for c in shown.columns}
  lines = ["  ".join(str(v).ljust(widths[c]) for c, v in zip(shown.columns, values)).rstrip()
           for values in [shown.columns, *shown.itertuples(index=False)]]
  return "\n".join(lines) + folded


def format_summary(verdicts: pd.DataFrame, *, code: int, strict: bool) -> str:
  parts = []
  for kind, names in (("cells", ("OK", "OK~", "FAIL", "MISSING")),
                      ("claims", ("PASS", "FAIL", "MISSING"))):
    counts = verdicts[verdicts["kind"] == kind[:-1]]["verdict"].value_counts()
    parts.append(f"{kind}: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in names))
  mode = " (--strict: MISSING fails)" if strict else ""
  return f"check: {'; '.join(parts)}{mode} -> exit {code}"
