"""What the tables are: the paper's reported numbers and the table and sweep specs, from YAML.

What a table holds is data (`results/specs/*.yaml`, `results/reported/realm_2020.yaml`), so a
new ablation is a YAML row, not code. Both files are checked field by field: an error names the
file and the dotted field. The shipped files are the defaults (package data in a wheel, found
through `realm_bench.resources`); `--specs` / `--reported` point at a user's own.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping

import yaml

from realm_bench import resources
from realm_bench.errors import InputError
from realm_bench.reporting.records import DATASETS, SCALES, SPLITS
from realm_bench.reporting.stats import CORRELATIONS

REPORTED_NAME = "realm_2020.yaml"
CLAIM_SCALES = (*SCALES, "any")
TREND_DIRECTIONS = ("decreasing", "increasing")
_REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class ReportedCell:
  table: str
  row: int
  system: str
  dataset: str
  metric: str
  split: str
  value: float
  tolerance: float
  source: str


@dataclasses.dataclass(frozen=True)
class Column:
  name: str
  dataset: str
  split: str
  metric: str


@dataclasses.dataclass(frozen=True)
class Row:
  label: str
  experiment: str | None
  row: int | None  # the paper's row number (a synthetic row may name the row it twins)


@dataclasses.dataclass(frozen=True)
class Side:
  """One side of a claim: an experiment's runs, optionally only those with given params."""
  experiment: str
  params: Mapping[str, Any]

  def describe(self) -> str:
    extra = ", ".join(f"{k}={v}" for k, v in self.params.items())
    return f"{self.experiment}[{extra}]" if extra else self.experiment


@dataclasses.dataclass(frozen=True)
class Claim:
  id: str
  text: str
  better: Side
  worse: Side
  dataset: str
  split: str
  metric: str
  scale: str
  margin: float


@dataclasses.dataclass(frozen=True)
class TrendClaim:
  """A sweep's claim: `metric` falls (or rises) as `params.<param>` of `experiment` grows,
  judged by a rank correlation over the sweep's points, not by two of them."""
  id: str
  text: str
  experiment: str
  param: str
  direction: str        # decreasing | increasing
  correlation: str      # spearman | kendall
  dataset: str
  split: str
  metric: str
  scale: str


@dataclasses.dataclass(frozen=True)
class SweepColumn:
  name: str
  metric: str | None
  stat: str | None


@dataclasses.dataclass(frozen=True)
class SweepReference:
  """A fixed point a sweep is read against (the warm start every point starts from, say): the
  mean of `metric` over `experiment`'s runs on the sweep's dataset and split, per scale."""
  name: str
  experiment: str
  metric: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
  """What every generated table has: its file, its place in the order, and its claims."""
  id: str
  kind: str
  order: int
  title: str
  path: Path
  claims: tuple[Claim | TrendClaim, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class TableSpec(Spec):
  """A paper table (`kind: table`): reported rows beside ours, then a synthetic section."""
  reported_table: str
  columns: tuple[Column, ...]
  rows: tuple[Row, ...]
  synthetic_title: str
  synthetic_columns: tuple[Column, ...]
  synthetic_rows: tuple[Row, ...]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SweepSpec(Spec):
  """A sweep (`kind: sweep`): one row per value of a run parameter of one experiment."""
  experiment: str
  param: str
  dataset: str
  split: str
  sweep_columns: tuple[SweepColumn, ...]
  references: tuple[SweepReference, ...] = ()

  reported_table = None   # claims of a sweep are not tied to a paper table


def _load_yaml(path: Path):
  if not path.is_file():
    raise InputError("file does not exist", path=path)
  try:
    return yaml.safe_load(path.read_text(encoding="utf-8"))
  except yaml.YAMLError as e:
    mark = getattr(e, "problem_mark", None)
    raise InputError(f"not valid YAML ({getattr(e, 'problem', None) or e})", path=path,
                     line=None if mark is None else mark.line + 1) from None


def _field(obj, key: str, kinds, path: Path, where: str, default=_REQUIRED):
  """obj[key] checked against kinds; errors name the file and the dotted field."""
  field = f"{where}.{key}" if where else key
  if not isinstance(obj, dict):
    raise InputError("expected a mapping", path=path, field=where or None)
  if key not in obj or (obj[key] is None and default is not _REQUIRED):
    if default is _REQUIRED:
      raise InputError("missing", path=path, field=field)
    return default
  value = obj[key]
  kinds = kinds if isinstance(kinds, tuple) else (kinds,)
  ok = any(isinstance(value, k) and not (k in (int, float) and isinstance(value, bool))
           for k in kinds)
  if not ok:
    names = " or ".join(k.__name__ for k in kinds)
    raise InputError(f"expected {names}, got {value!r}", path=path, field=field)
  return value


def _choice(obj, key, choices, path, where):
  value = _field(obj, key, str, path, where)
  if value not in choices:
    raise InputError(f"expected one of {', '.join(choices)}, got {value!r}", path=path,
                     field=f"{where}.{key}" if where else key)
  return value


def default_specs_dir() -> Path:
  return resources.shipped_folder("results/specs")


def default_reported_path() -> Path:
  return resources.shipped_folder("results/reported") / REPORTED_NAME


def load_reported(path=None) -> dict[tuple, ReportedCell]:
  """The paper's numbers keyed by (table, row, dataset, split, metric); the shipped ones by
  default."""
  path = default_reported_path() if path is None else Path(path)
  doc = _load_yaml(path)
  cells = _field(doc, "cells", list, path, "")
  out = {}
  for i, cell in enumerate(cells):
    where = f"cells[{i}]"
    entry = ReportedCell(
        table=_field(cell, "table", str, path, where),
        row=_field(cell, "row", int, path, where),
        system=_field(cell, "system", str, path, where),
        dataset=_choice(cell, "dataset", DATASETS, path, where),
        metric=_field(cell, "metric", str, path, where),
        split=_choice(cell, "split", SPLITS, path, where),
        value=float(_field(cell, "value", (int, float), path, where)),
        tolerance=float(_field(cell, "tolerance", (int, float), path, where)),
        source=_field(cell, "source", str, path, where))
    if not (math.isfinite(entry.value) and math.isfinite(entry.tolerance)
            and entry.tolerance > 0):
      raise InputError("value and tolerance must be finite, tolerance > 0", path=path,
                       field=where)
    key = (entry.table, entry.row, entry.dataset, entry.split, entry.metric)
    if key in out:
      raise InputError(f"duplicate cell {key}", path=path, field=where)
    out[key] = entry
  return out


def _columns(items, path, where) -> tuple[Column, ...]:
  out = []
  for i, c in enumerate(items):
    w = f"{where}[{i}]"
    out.append(Column(name=_field(c, "name", str, path, w),
                      dataset=_choice(c, "dataset", DATASETS, path, w),
                      split=_choice(c, "split", SPLITS, path, w),
                      metric=_field(c, "metric", str, path, w)))
  if not out:
    raise InputError("needs at least one column", path=path, field=where)
  return tuple(out)


def _side(value, path, where) -> Side:
  if isinstance(value, str):
    return Side(experiment=value, params={})
  experiment = _field(value, "experiment", str, path, where)
  params = _field(value, "params", dict, path, where, default={})
  return Side(experiment=experiment, params=dict(params))


def _trend(value, path, where) -> dict:
  return dict(experiment=_field(value, "experiment", str, path, where),
              param=_field(value, "param", str, path, where),
              direction=_choice(value, "direction", TREND_DIRECTIONS, path, where),
              correlation=(_choice(value, "correlation", CORRELATIONS, path, where)
                           if value.get("correlation") is not None else "spearman"))


def _claims(spec_doc, path) -> tuple[Claim | TrendClaim, ...]:
  out, ids = [], set()
  for i, c in enumerate(_field(spec_doc, "claims", list, path, "", default=[])):
    w = f"claims[{i}]"
    common = dict(id=_field(c, "id", str, path, w), text=_field(c, "text", str, path, w),
                  dataset=_choice(c, "dataset", DATASETS, path, w),
                  split=_choice(c, "split", SPLITS, path, w),
                  metric=_field(c, "metric", str, path, w),
                  scale=_choice(c, "scale", CLAIM_SCALES, path, w))
    if "trend" in c:
      if "better" in c or "worse" in c:
        raise InputError("give either better and worse, or trend", path=path, field=w)
      claim = TrendClaim(**common, **_trend(_field(c, "trend", dict, path, w), path,
                                            f"{w}.trend"))
    else:
      claim = Claim(**common,
                    better=_side(_field(c, "better", (str, dict), path, w), path,
                                 f"{w}.better"),
                    worse=_side(_field(c, "worse", (str, dict), path, w), path, f"{w}.worse"),
                    margin=float(_field(c, "margin", (int, float), path, w, default=0.0)))
    if claim.id in ids:
      raise InputError(f"duplicate claim id {claim.id!r}", path=path, field=f"{w}.id")
    ids.add(claim.id)
    out.append(claim)
  return tuple(out)


def _table_spec(doc, path, common, reported) -> TableSpec:
  table = _field(doc, "reported_table", str, path, "")
  systems = {(c.table, c.row): c.system for c in reported.values()}
  columns = _columns(_field(doc, "columns", list, path, ""), path, "columns")
  rows = []
  for i, r in enumerate(_field(doc, "rows", list, path, "")):
    w = f"rows[{i}]"
    number = _field(r, "row", int, path, w)
    if (table, number) not in systems:
      raise InputError(f"no row {number} of table {table} in the reported numbers",
                       path=path, field=f"{w}.row")
    rows.append(Row(label=_field(r, "label", str, path, w, default=systems[(table, number)]),
                    experiment=_field(r, "experiment", str, path, w, default=None),
                    row=number))
  synthetic = _field(doc, "synthetic", dict, path, "", default={})
  synthetic_rows = []
  for i, r in enumerate(_field(synthetic, "rows", list, path, "synthetic", default=[])):
    w = f"synthetic.rows[{i}]"
    synthetic_rows.append(Row(label=_field(r, "label", str, path, w),
                              experiment=_field(r, "experiment", str, path, w),
                              row=_field(r, "row", int, path, w, default=None)))
  synthetic_columns = (
      _columns(synthetic["columns"], path, "synthetic.columns")
      if synthetic.get("columns") is not None else columns)
  return TableSpec(**common, reported_table=table, columns=columns, rows=tuple(rows),
              synthetic_title=_field(synthetic, "title", str, path, "synthetic",
                                     default="Synthetic scale"),
              synthetic_columns=synthetic_columns, synthetic_rows=tuple(synthetic_rows))


def _sweep_spec(doc, path, common) -> SweepSpec:
  columns = []
  for i, c in enumerate(_field(doc, "columns", list, path, "")):
    w = f"columns[{i}]"
    metric = _field(c, "metric", str, path, w, default=None)
    stat = _field(c, "stat", str, path, w, default=None)
    if (metric is None) == (stat is None):
      raise InputError("give exactly one of metric or stat", path=path, field=w)
    columns.append(SweepColumn(name=_field(c, "name", str, path, w), metric=metric, stat=stat))
  return SweepSpec(**common, experiment=_field(doc, "experiment", str, path, ""),
              param=_field(doc, "param", str, path, ""),
              dataset=_choice(doc, "dataset", DATASETS, path, ""),
              split=_choice(doc, "split", SPLITS, path, ""), sweep_columns=tuple(columns),
              references=_references(doc, path, columns))


def _references(doc, path, columns) -> tuple[SweepReference, ...]:
  """A reference's metric must be one the sweep plots: its line is drawn on the y axis that
  shows that metric, and a line with no axis to sit on would silently not appear."""
  plotted = [c.metric for c in columns if c.metric is not None]
  out, names = [], set()
  for i, r in enumerate(_field(doc, "references", list, path, "", default=[])):
    w = f"references[{i}]"
    ref = SweepReference(name=_field(r, "name", str, path, w),
                         experiment=_field(r, "experiment", str, path, w),
                         metric=_field(r, "metric", str, path, w))
    if ref.metric not in plotted:
      raise InputError(f"metric {ref.metric!r} is not one of the sweep's metric columns "
                       f"({', '.join(plotted) or 'none'}), so no plot shows it", path=path,
                       field=f"{w}.metric")
    if ref.name in names:
      raise InputError(f"duplicate reference name {ref.name!r}", path=path, field=f"{w}.name")
    names.add(ref.name)
    out.append(ref)
  return tuple(out)


def load_specs(specs_dir=None, reported: Mapping | None = None) -> list[Spec]:
  """Every `*.yaml` spec in specs_dir (the shipped ones by default), in their `order`."""
  specs_dir = default_specs_dir() if specs_dir is None else Path(specs_dir)
  reported = load_reported() if reported is None else reported
  if not specs_dir.is_dir():
    raise InputError("specs folder does not exist", path=specs_dir)
  specs = []
  for path in sorted(specs_dir.glob("*.yaml")):
    doc = _load_yaml(path)
    common = dict(id=_field(doc, "id", str, path, ""),
                  kind=_choice(doc, "kind", ("table", "sweep"), path, ""),
                  order=_field(doc, "order", int, path, "", default=100),
                  title=_field(doc, "title", str, path, ""), path=path,
                  claims=_claims(doc, path))
    if common["kind"] == "table":
      specs.append(_table_spec(doc, path, common, reported))
    else:
      specs.append(_sweep_spec(doc, path, common))
  ids = [s.id for s in specs]
  for spec in specs:
    if ids.count(spec.id) > 1:
      raise InputError(f"spec id {spec.id!r} is used twice", path=spec.path, field="id")
  return sorted(specs, key=lambda s: (s.order, s.id))
