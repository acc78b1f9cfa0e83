"""Building a table's sections from the records frame: paper rows, synthetic rows, sweeps.

Paper-scale runs sit beside the printed numbers with the difference; synthetic-scale runs get
their own section and never a difference, because a number from the synthetic world compared
against a Wikipedia number means nothing. Only evaluations count (training records are there
for their lineage). Every cell is the mean over runs (seeds) with the half-width of its 95%
t-interval (`±`, blank for a single run) and n, the same statistics `check` uses. A sweep's
reference lines (its spec's `references`, e.g. the warm start's recall) are computed the same
way, per scale, and named in the sweep table's note as well as drawn on its plot.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting.collect import BASE_COLUMNS, collect_records, select
from realm_bench.reporting.records import SCALES
from realm_bench.reporting.specs import Spec, SweepSpec, TableSpec
from realm_bench.reporting.stats import CellStat, cell_stat

MISSING = "—"


@dataclasses.dataclass(frozen=True)
class Section:
  key: str          # the `section` column of the csv
  title: str
  note: str
  frame: pd.DataFrame
  kinds: Mapping[str, str]  # column -> text | value | interval | delta | count | param


@dataclasses.dataclass(frozen=True)
class BuiltTable:
  spec: Spec
  sections: tuple[Section, ...]
  sweep_points: pd.DataFrame | None = None  # for the staleness plot
  sweep_references: pd.DataFrame | None = None  # its reference lines (REFERENCE_COLUMNS)


REFERENCE_COLUMNS = ("scale", "name", "experiment", "metric", "value", "±", "n")


def _value(mean):
  return math.nan if mean is None else round(mean, 3)


def _stat(rows: pd.DataFrame) -> CellStat:
  return cell_stat(rows["value"].tolist())


def _put(out: dict, kinds: dict, name: str, stat: CellStat) -> None:
  """The cell's `NAME ours`, `NAME ±` and `NAME n` columns."""
  out[f"{name} ours"] = _value(stat.mean)
  out[f"{name} ±"] = _value(None if math.isnan(stat.half_width) else stat.half_width)
  out[f"{name} n"] = stat.n
  kinds.update({f"{name} ours": "value", f"{name} ±": "interval", f"{name} n": "count"})


def _paper_section(spec: TableSpec, reported, frame) -> Section:
  records, kinds = [], {"row": "count", "system": "text", "experiment": "text"}
  sources = sorted({c.source for c in reported.values() if c.table == spec.reported_table})
  for row in spec.rows:
    out = {"row": row.row, "system": row.label, "experiment": row.experiment}
    for col in spec.columns:
      cell = reported.get((spec.reported_table, row.row, col.dataset, col.split, col.metric))
      rep = math.nan if cell is None else cell.value
      stat = CellStat(mean=None, half_width=math.nan, n=0)
      if row.experiment:
        stat = _stat(select(
            frame, experiment=row.experiment, scale="paper", dataset=col.dataset,
            split=col.split, metric=col.metric, table=spec.reported_table, row=row.row))
      out[f"{col.name} reported"] = rep
      kinds[f"{col.name} reported"] = "value"
      _put(out, kinds, col.name, stat)
      if not row.experiment:
        out[f"{col.name} n"] = pd.NA
      out[f"{col.name} Δ"] = (_value(stat.mean - rep) if stat.mean is not None
                              and cell is not None else math.nan)
      kinds[f"{col.name} Δ"] = "delta"
    records.append(out)
  table = pd.DataFrame(records, columns=list(kinds))
  table["row"] = table["row"].astype("Int64")
  for col in spec.columns:
    table[f"{col.name} n"] = table[f"{col.name} n"].astype("Int64")
  note = (f"Reported: {'; '.join(sources)}. Ours: mean of the paper-scale run records, ± the "
          f"half-width of its 95% t-interval over runs (none for one run), n = how many runs. "
          f"Δ = ours − reported. {MISSING} = no number; a row without an experiment is not "
          f"rerun here.")
  return Section(key="paper", title="Paper scale: reported | ours | Δ", note=note,
                 frame=table, kinds=kinds)


def _synthetic_section(spec: TableSpec, frame) -> Section:
  records, kinds = [], {"system": "text", "experiment": "text"}
  for row in spec.synthetic_rows:
    out = {"system": row.label, "experiment": row.experiment}
    for col in spec.synthetic_columns:
      _put(out, kinds, col.name, _stat(select(
          frame, experiment=row.experiment, scale="synthetic", dataset=col.dataset,
          split=col.split, metric=col.metric, table=spec.reported_table, row=row.row)))
    records.append(out)
  table = pd.DataFrame(records, columns=list(kinds))
  for col in spec.synthetic_columns:
    table[f"{col.name} n"] = table[f"{col.name} n"].astype("Int64")
  note = (f"{spec.synthetic_title}. Ours: mean of the synthetic-scale run records, ± the "
          f"half-width of its 95% t-interval over runs (seeds; none for one run), n = how "
          f"many runs. No Δ: the paper's numbers are on other data.")
  return Section(key="synthetic", title="Synthetic scale: ours only, not comparable to the "
                 "paper", note=note,
                 frame=table, kinds=kinds)


def _sweep_kinds(spec: SweepSpec) -> dict[str, str]:
  kinds = {"scale": "text", spec.param: "param"}
  for c in spec.sweep_columns:
    kinds[c.name] = "value"
    if c.metric is not None:
      kinds[f"{c.name} ±"] = "interval"
  kinds["n"] = "count"
  return kinds


def sweep_points(spec: SweepSpec, frame: pd.DataFrame) -> pd.DataFrame:
  """One row per (scale, parameter value): mean of each column over runs, the ± of each
  metric column, and n runs."""
  param_col = f"params.{spec.param}"
  picked = frame[(frame["kind"] != "train") & (frame["experiment"] == spec.experiment)
                 & (frame["dataset"] == spec.dataset) & (frame["split"] == spec.split)]
  if param_col not in picked.columns:
    picked = picked.assign(**{param_col: math.nan})
  unswept = picked[picked[param_col].isna()]
  if len(unswept):
    raise InputError(f"a {spec.experiment!r} run must record the swept parameter",
                     path=unswept["path"].iloc[0], field=param_col)
  out = []
  for (scale, value), group in picked.groupby(["scale", param_col], sort=True):
    point: dict[str, Any] = {"scale": scale, spec.param: value}
    runs = group.drop_duplicates("path")   # one row per record (seeds share run ids)
    for c in spec.sweep_columns:
      if c.metric is not None:
        stat = _stat(group[group["metric"] == c.metric])
        point[f"{c.name} ±"] = _value(None if math.isnan(stat.half_width) else stat.half_width)
      else:
        stat_col = f"stats.{c.stat}"
        values = (pd.to_numeric(runs[stat_col], errors="coerce") if stat_col in runs.columns
                  else pd.Series([], dtype=float))
        stat = cell_stat(values.tolist())
      point[c.name] = _value(stat.mean)
    # Seeds, not records: each seed leaves one record per metric (an evaluation for EM, a
    # recall record for Recall@5), so n is the most records behind any one column, the same
    # count `check` gives a claim on that column.
    per_metric = [group[group["metric"] == c.metric]["path"].nunique()
                  for c in spec.sweep_columns if c.metric is not None]
    point["n"] = max(per_metric) if per_metric else len(runs)
    out.append(point)
  points = pd.DataFrame(out, columns=list(_sweep_kinds(spec)))
  points["n"] = points["n"].astype("Int64")
  values = pd.to_numeric(points[spec.param], errors="coerce")
  if len(values) and values.notna().all() and (values % 1 == 0).all():
    points[spec.param] = values.astype("Int64")
  return points


def sweep_references(spec: SweepSpec, frame: pd.DataFrame) -> pd.DataFrame:
  """Each reference's value per scale that has its records: the mean of its metric over its
  experiment's runs (seeds) on the sweep's dataset and split, with ± and n as a cell's."""
  rows = []
  for ref in spec.references:
    for scale in SCALES:
      stat = _stat(select(frame, experiment=ref.experiment, scale=scale, dataset=spec.dataset,
                          split=spec.split, metric=ref.metric))
      if stat.n:
        rows.append({"scale": scale, "name": ref.name, "experiment": ref.experiment,
                     "metric": ref.metric, "value": _value(stat.mean),
                     "±": _value(None if math.isnan(stat.half_width) else stat.half_width),
                     "n": stat.n})
  return pd.DataFrame(rows, columns=list(REFERENCE_COLUMNS))


def reference_note(spec: SweepSpec, references: pd.DataFrame, scale: str) -> str:
  """The sentence naming a scale's reference lines and their values ('' without any)."""
  parts = []
  for ref in spec.references:
    found = references[(references["scale"] == scale) & (references["name"] == ref.name)]
    source = f"({ref.metric} of experiment {ref.experiment!r})"
    if found.empty:
      parts.append(f"{ref.name}: no records at this scale {source}")
    else:
      row = found.iloc[0]
      pm = "" if math.isnan(row["±"]) else f" ± {row['±']:.1f}"
      parts.append(f"{ref.name} = {row['value']:.1f}{pm}, n = {int(row['n'])} {source}")
  if not parts:
    return ""
  return f"Reference line{'s' if len(parts) > 1 else ''} on the plot: {'; '.join(parts)}."


def _sweep_sections(spec: SweepSpec, points: pd.DataFrame,
                    references: pd.DataFrame) -> tuple[Section, ...]:
  kinds = _sweep_kinds(spec)
  columns = [c for c in points.columns if c != "scale"]
  what = (f"Runs of experiment {spec.experiment!r} on {spec.dataset} {spec.split}, one row "
          f"per params.{spec.param}; values are means over runs, ± the half-width of their 95% "
          f"t-interval (none for one run), n = runs behind each column, i.e. seeds.")
  if points.empty:
    return (Section(key="sweep", title="No sweep runs yet", note=what,
                    frame=points[columns], kinds=kinds),)
  sections = []
  for scale in SCALES:
    part = points[points["scale"] == scale]
    if len(part):
      label = "synthetic scale (ours only)" if scale == "synthetic" else "paper scale"
      note = " ".join(t for t in (what, reference_note(spec, references, scale)) if t)
      sections.append(Section(key=f"sweep {scale}", title=f"Sweep at {label}", note=note,
                              frame=part[columns].reset_index(drop=True), kinds=kinds))
  return tuple(sections)


def build_tables(*, frame: pd.DataFrame, specs: Sequence[Spec],
                 reported: Mapping) -> list[BuiltTable]:
  built = []
  for spec in specs:
    if isinstance(spec, TableSpec):
      sections = [_paper_section(spec, reported, frame)]
      if spec.synthetic_rows:
        sections.append(_synthetic_section(spec, frame))
      built.append(BuiltTable(spec=spec, sections=tuple(sections)))
    else:
      points = sweep_points(spec, frame)
      references = sweep_references(spec, frame)
      built.append(BuiltTable(spec=spec, sections=_sweep_sections(spec, points, references),
                              sweep_points=points, sweep_references=references))
  return built


def load_frame(runs_dir) -> pd.DataFrame:
  """The records under runs_dir; a folder that does not exist simply means no runs yet."""
  if not Path(runs_dir).exists():
    print(f"note: runs folder {runs_dir} does not exist; showing the reported numbers only",
          file=sys.stderr)
    return pd.DataFrame(columns=list(BASE_COLUMNS))
  return collect_records(runs_dir)
