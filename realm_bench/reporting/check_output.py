"""`realm-bench check --format json|junit`: the verdicts for programs and CI systems.

JSON is one object (the exit code, the counts, one entry per verdict) for scripts. JUnit XML is
what CI systems (GitHub Actions reporters, GitLab, Jenkins) already render: one test suite per
spec, one test case per cell and claim, FAIL a failure, MISSING and INCONCLUSIVE skipped (a
failure under --strict), so a regression shows as the very cell that moved.
"""
from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pandas as pd

from realm_bench.reporting.check import NOT_DECIDED, fmt_interval, fmt_mean, format_summary


def _plain(value):
  """JSON-safe: NaN and None become null, numpy scalars Python numbers."""
  if value is None or isinstance(value, float) and math.isnan(value):
    return None
  return value.item() if hasattr(value, "item") else value


def _counts(verdicts: pd.DataFrame) -> dict:
  return {kind: {str(k): int(v) for k, v in
                 verdicts[verdicts["kind"] == kind]["verdict"].value_counts().items()}
          for kind in ("cell", "claim")}


def to_json(verdicts: pd.DataFrame, *, code: int, strict: bool) -> str:
  doc = {"exit_code": code, "strict": strict, "counts": _counts(verdicts),
         "summary": format_summary(verdicts, code=code, strict=strict),
         "verdicts": [{k: _plain(v) for k, v in row.items()}
                      for row in verdicts.to_dict(orient="records")]}
  return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def _number(value) -> str:
  value = _plain(value)
  return "—" if value is None else f"{value:.2f}"


def _message(row: dict) -> str:
  row = {k: _plain(v) for k, v in row.items()}
  if row["kind"] == "cell":
    return (f"{row['verdict']}: ours {fmt_mean(row['ours'], row['ours_pm'])} vs reported "
            f"{_number(row['reported'])} (Δ {_number(row['delta'])}, tolerance "
            f"{_number(row['tol'])}, n={int(row['n'])}) — {row['description']}")
  how = "".join(f"; {t}" for t in (row["method"], row["note"]) if t)
  if row["tol"] is None:   # a trend claim
    return (f"{row['verdict']}: correlation {_number(row['ours'])}, one-sided p "
            f"{_number(row['p_value'])} (n={int(row['n'])} per point{how}) — "
            f"{row['description']}")
  return (f"{row['verdict']}: {fmt_mean(row['ours'], row['ours_pm'])} vs "
          f"{fmt_mean(row['baseline'], row['baseline_pm'])}, Δ {_number(row['delta'])} "
          f"95% interval {fmt_interval(row['ci_low'], row['ci_high'])} (margin "
          f"{_number(row['tol'])}, n={int(row['n'])}{how}) — {row['description']}")


def to_junit(verdicts: pd.DataFrame, *, strict: bool) -> str:
  root = ET.Element("testsuites", name="realm-bench check")
  totals = {"tests": 0, "failures": 0, "skipped": 0}
  for spec, group in verdicts.groupby("spec", sort=False):
    suite = ET.SubElement(root, "testsuite", name=str(spec))
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for row in group.to_dict(orient="records"):
      case = ET.SubElement(suite, "testcase", classname=f"realm_bench.check.{spec}",
                           name=f"{row['item']} [{row['scale']}]")
      message = _message(row)
      counts["tests"] += 1
      if row["verdict"] == "FAIL" or (row["verdict"] in NOT_DECIDED and strict):
        ET.SubElement(case, "failure", message=message, type=row["verdict"]).text = message
        counts["failures"] += 1
      elif row["verdict"] in NOT_DECIDED:
        ET.SubElement(case, "skipped", message=message)
        counts["skipped"] += 1
      else:
        ET.SubElement(case, "system-out").text = message
    suite.attrib.update({k: str(v) for k, v in counts.items()})
    totals = {k: totals[k] + counts[k] for k in totals}
  root.attrib.update({k: str(v) for k, v in totals.items()})
  ET.indent(root)
  return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
