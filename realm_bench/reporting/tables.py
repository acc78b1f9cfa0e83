"""`realm-bench tables`: the paper's tables with our numbers beside them, from run records.

What a table holds is data (`results/specs/*.yaml`, `results/reported/realm_2020.yaml`), so a
new ablation is a YAML row, not code. Paper-scale runs sit beside the printed numbers with the
difference; synthetic-scale runs get their own section and never a difference, because a
number from the synthetic world compared against a Wikipedia number means nothing.
"""
from __future__ import annotations

import dataclasses
import html
import math
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import yaml

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text
from realm_bench.reporting.collect import BASE_COLUMNS, collect_records, mean_and_count, select
from realm_bench.reporting.records import DATASETS, SCALES, SPLITS

RESULTS_DIR = Path(__file__).resolve().parents[2] / "results"
REPORTED_PATH = RESULTS_DIR / "reported" / "realm_2020.yaml"
SPECS_DIR = RESULTS_DIR / "specs"
FORMATS = ("md", "csv", "tex", "html")
CLAIM_SCALES = (*SCALES, "any")
MISSING = "—"
_REQUIRED = object()


# ---------------------------------------------------------------------------------------------
# Reported numbers and specs.


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
class SweepColumn:
  name: str
  metric: str | None
  stat: str | None


@dataclasses.dataclass(frozen=True)
class Spec:
  """One generated table: `kind` 'table' (paper rows + synthetic rows) or 'sweep'."""
  id: str
  kind: str
  order: int
  title: str
  path: Path
  claims: tuple[Claim, ...]
  reported_table: str | None = None
  columns: tuple[Column, ...] = ()
  rows: tuple[Row, ...] = ()
  synthetic_title: str = ""
  synthetic_columns: tuple[Column, ...] = ()
  synthetic_rows: tuple[Row, ...] = ()
  experiment: str = ""
  param: str = ""
  dataset: str = ""
  split: str = ""
  sweep_columns: tuple[SweepColumn, ...] = ()


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


def load_reported(path=REPORTED_PATH) -> dict[tuple, ReportedCell]:
  """The paper's numbers keyed by (table, row, dataset, split, metric)."""
  path = Path(path)
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


def _claims(spec_doc, path) -> tuple[Claim, ...]:
  out, ids = [], set()
  for i, c in enumerate(_field(spec_doc, "claims", list, path, "", default=[])):
    w = f"claims[{i}]"
    claim = Claim(id=_field(c, "id", str, path, w), text=_field(c, "text", str, path, w),
                  better=_side(_field(c, "better", (str, dict), path, w), path, f"{w}.better"),
                  worse=_side(_field(c, "worse", (str, dict), path, w), path, f"{w}.worse"),
                  dataset=_choice(c, "dataset", DATASETS, path, w),
                  split=_choice(c, "split", SPLITS, path, w),
                  metric=_field(c, "metric", str, path, w),
                  scale=_choice(c, "scale", CLAIM_SCALES, path, w),
                  margin=float(_field(c, "margin", (int, float), path, w, default=0.0)))
    if claim.id in ids:
      raise InputError(f"duplicate claim id {claim.id!r}", path=path, field=f"{w}.id")
    ids.add(claim.id)
    out.append(claim)
  return tuple(out)


def _table_spec(doc, path, common, reported) -> Spec:
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
  return Spec(**common, reported_table=table, columns=columns, rows=tuple(rows),
              synthetic_title=_field(synthetic, "title", str, path, "synthetic",
                                     default="Synthetic scale"),
              synthetic_columns=synthetic_columns, synthetic_rows=tuple(synthetic_rows))


def _sweep_spec(doc, path, common) -> Spec:
  columns = []
  for i, c in enumerate(_field(doc, "columns", list, path, "")):
    w = f"columns[{i}]"
    metric = _field(c, "metric", str, path, w, default=None)
    stat = _field(c, "stat", str, path, w, default=None)
    if (metric is None) == (stat is None):
      raise InputError("give exactly one of metric or stat", path=path, field=w)
    columns.append(SweepColumn(name=_field(c, "name", str, path, w), metric=metric, stat=stat))
  return Spec(**common, experiment=_field(doc, "experiment", str, path, ""),
              param=_field(doc, "param", str, path, ""),
              dataset=_choice(doc, "dataset", DATASETS, path, ""),
              split=_choice(doc, "split", SPLITS, path, ""), sweep_columns=tuple(columns))


def load_specs(specs_dir=SPECS_DIR, reported: Mapping | None = None) -> list[Spec]:
  """Every `*.yaml` spec in specs_dir, in their `order`."""
  specs_dir = Path(specs_dir)
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


# ---------------------------------------------------------------------------------------------
# Building the sections of one table.


@dataclasses.dataclass(frozen=True)
class Section:
  key: str          # the `section` column of the csv
  title: str
  note: str
  frame: pd.DataFrame
  kinds: Mapping[str, str]  # column -> text | value | delta | count | param


@dataclasses.dataclass(frozen=True)
class BuiltTable:
  spec: Spec
  sections: tuple[Section, ...]
  sweep_points: pd.DataFrame | None = None  # for the staleness plot


def _value(mean):
  return math.nan if mean is None else round(mean, 3)


def _paper_section(spec: Spec, reported, frame) -> Section:
  records, kinds = [], {"row": "count", "system": "text", "experiment": "text"}
  sources = sorted({c.source for c in reported.values() if c.table == spec.reported_table})
  for row in spec.rows:
    out = {"row": row.row, "system": row.label, "experiment": row.experiment}
    for col in spec.columns:
      cell = reported.get((spec.reported_table, row.row, col.dataset, col.split, col.metric))
      rep = math.nan if cell is None else cell.value
      ours, n = None, pd.NA
      if row.experiment:
        ours, n = mean_and_count(select(
            frame, experiment=row.experiment, scale="paper", dataset=col.dataset,
            split=col.split, metric=col.metric, table=spec.reported_table,
            row=row.row)["value"])
      out[f"{col.name} reported"] = rep
      out[f"{col.name} ours"] = _value(ours)
      out[f"{col.name} n"] = n
      out[f"{col.name} Δ"] = (_value(ours - rep) if ours is not None and cell is not None
                              else math.nan)
      kinds.update({f"{col.name} reported": "value", f"{col.name} ours": "value",
                    f"{col.name} n": "count", f"{col.name} Δ": "delta"})
    records.append(out)
  table = pd.DataFrame(records, columns=list(kinds))
  table["row"] = table["row"].astype("Int64")
  for col in spec.columns:
    table[f"{col.name} n"] = table[f"{col.name} n"].astype("Int64")
  note = (f"Reported: {'; '.join(sources)}. Ours: mean of the paper-scale run records "
          f"(n = how many). Δ = ours − reported. {MISSING} = no number; a row without an "
          f"experiment is not rerun here.")
  return Section(key="paper", title="Paper scale: reported | ours | Δ", note=note,
                 frame=table, kinds=kinds)


def _synthetic_section(spec: Spec, frame) -> Section:
  records, kinds = [], {"system": "text", "experiment": "text"}
  for row in spec.synthetic_rows:
    out = {"system": row.label, "experiment": row.experiment}
    for col in spec.synthetic_columns:
      ours, n = mean_and_count(select(
          frame, experiment=row.experiment, scale="synthetic", dataset=col.dataset,
          split=col.split, metric=col.metric, table=spec.reported_table,
          row=row.row)["value"])
      out[f"{col.name} ours"] = _value(ours)
      out[f"{col.name} n"] = n
      kinds.update({f"{col.name} ours": "value", f"{col.name} n": "count"})
    records.append(out)
  table = pd.DataFrame(records, columns=list(kinds))
  for col in spec.synthetic_columns:
    table[f"{col.name} n"] = table[f"{col.name} n"].astype("Int64")
  note = (f"{spec.synthetic_title}. Ours: mean of the synthetic-scale run records (n = how "
          f"many). No Δ: the paper's numbers are on other data.")
  return Section(key="synthetic", title="Synthetic scale: ours only, not comparable to the "
                 "paper", note=note,
                 frame=table, kinds=kinds)


def _sweep_kinds(spec: Spec) -> dict[str, str]:
  kinds = {"scale": "text", spec.param: "param"}
  kinds.update({c.name: "value" for c in spec.sweep_columns})
  kinds["n"] = "count"
  return kinds


def sweep_points(spec: Spec, frame: pd.DataFrame) -> pd.DataFrame:
  """One row per (scale, parameter value): mean of each column over runs, and n runs."""
  param_col = f"params.{spec.param}"
  picked = frame[(frame["experiment"] == spec.experiment) & (frame["dataset"] == spec.dataset)
                 & (frame["split"] == spec.split)]
  if param_col not in picked.columns:
    picked = picked.assign(**{param_col: math.nan})
  unswept = picked[picked[param_col].isna()]
  if len(unswept):
    raise InputError(f"a {spec.experiment!r} run must record the swept parameter",
                     path=unswept["path"].iloc[0], field=param_col)
  out = []
  for (scale, value), group in picked.groupby(["scale", param_col], sort=True):
    point: dict[str, Any] = {"scale": scale, spec.param: value}
    runs = group.drop_duplicates("run_id")
    for c in spec.sweep_columns:
      if c.metric is not None:
        values = group[group["metric"] == c.metric]["value"]
      else:
        stat_col = f"stats.{c.stat}"
        values = (pd.to_numeric(runs[stat_col], errors="coerce") if stat_col in runs.columns
                  else pd.Series([], dtype=float))
      point[c.name] = _value(mean_and_count(values)[0])
    point["n"] = runs["run_id"].nunique()
    out.append(point)
  points = pd.DataFrame(out, columns=list(_sweep_kinds(spec)))
  points["n"] = points["n"].astype("Int64")
  values = pd.to_numeric(points[spec.param], errors="coerce")
  if len(values) and values.notna().all() and (values % 1 == 0).all():
    points[spec.param] = values.astype("Int64")
  return points


def _sweep_sections(spec: Spec, points: pd.DataFrame) -> tuple[Section, ...]:
  kinds = _sweep_kinds(spec)
  columns = [c for c in points.columns if c != "scale"]
  what = (f"Runs of experiment {spec.experiment!r} on {spec.dataset} {spec.split}, one row "
          f"per params.{spec.param}; values are means over runs (n = how many).")
  if points.empty:
    return (Section(key="sweep", title="No sweep runs yet", note=what,
                    frame=points[columns], kinds=kinds),)
  sections = []
  for scale in SCALES:
    part = points[points["scale"] == scale]
    if len(part):
      label = "synthetic scale (ours only)" if scale == "synthetic" else "paper scale"
      sections.append(Section(key=f"sweep {scale}", title=f"Sweep at {label}", note=what,
                              frame=part[columns].reset_index(drop=True), kinds=kinds))
  return tuple(sections)


def build_tables(*, frame: pd.DataFrame, specs: Sequence[Spec],
                 reported: Mapping) -> list[BuiltTable]:
  built = []
  for spec in specs:
    if spec.kind == "table":
      sections = [_paper_section(spec, reported, frame)]
      if spec.synthetic_rows:
        sections.append(_synthetic_section(spec, frame))
      built.append(BuiltTable(spec=spec, sections=tuple(sections)))
    else:
      points = sweep_points(spec, frame)
      built.append(BuiltTable(spec=spec, sections=_sweep_sections(spec, points),
                              sweep_points=points))
  return built


def load_frame(runs_dir) -> pd.DataFrame:
  """The records under runs_dir; a folder that does not exist simply means no runs yet."""
  if not Path(runs_dir).exists():
    print(f"note: runs folder {runs_dir} does not exist; showing the reported numbers only",
          file=sys.stderr)
    return pd.DataFrame(columns=list(BASE_COLUMNS))
  return collect_records(runs_dir)


# ---------------------------------------------------------------------------------------------
# Rendering.


def _display(value, kind: str) -> str:
  if value is None or value is pd.NA or isinstance(value, float) and math.isnan(value):
    return MISSING
  if kind == "value":
    return f"{value:.1f}"
  if kind == "delta":
    return f"{value:+.1f}"
  if kind in ("count", "param") and float(value).is_integer():
    return str(int(value))
  return str(value) if str(value) else MISSING


def _display_frame(section: Section) -> pd.DataFrame:
  return pd.DataFrame({c: [_display(v, section.kinds[c]) for v in section.frame[c]]
                       for c in section.frame.columns}, columns=section.frame.columns)


def _markdown_table(section: Section) -> str:
  shown = _display_frame(section)
  def cell(text):
    return str(text).replace("|", "\\|")
  lines = ["| " + " | ".join(cell(c) for c in shown.columns) + " |",
           "|" + "|".join("---" if section.kinds[c] == "text" else "---:"
                          for c in shown.columns) + "|"]
  lines += ["| " + " | ".join(cell(v) for v in row) + " |"
            for row in shown.itertuples(index=False)]
  return "\n".join(lines)


def to_markdown(table: BuiltTable, header: str) -> str:
  parts = [f"# {table.spec.title}", "", f"_{header}_", ""]
  for section in table.sections:
    parts += [f"## {section.title}", "", section.note, "", _markdown_table(section), ""]
  return "\n".join(parts)


def to_csv(table: BuiltTable, header: str) -> str:
  frames = [s.frame.assign(section=s.key)[["section", *s.frame.columns]]
            for s in table.sections]
  body = pd.concat(frames, ignore_index=True, sort=False).to_csv(index=False,
                                                                 lineterminator="\n")
  return f"# {header}\n# {table.spec.title}\n{body}"


_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "—": "---", "−": "$-$", "Δ": r"$\Delta$"}


def _tex(text) -> str:
  return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_tex(table: BuiltTable, header: str) -> str:
  lines = [f"% {header}", f"% {table.spec.title}"]
  for section in table.sections:
    shown = _display_frame(section)
    align = "".join("l" if section.kinds[c] == "text" else "r" for c in shown.columns)
    lines += [r"\begin{table}[ht]", r"\centering",
              rf"\caption{{{_tex(table.spec.title)} --- {_tex(section.title)}. "
              rf"{_tex(section.note)}}}",
              rf"\begin{{tabular}}{{{align}}}", r"\hline",
              " & ".join(_tex(c) for c in shown.columns) + r" \\", r"\hline"]
    lines += [" & ".join(_tex(v) for v in row) + r" \\" for row in shown.itertuples(index=False)]
    lines += [r"\hline", r"\end{tabular}", r"\end{table}", ""]
  return "\n".join(lines)


def to_html(table: BuiltTable, header: str) -> str:
  parts = [f"<!-- {html.escape(header)} -->", f"<h1>{html.escape(table.spec.title)}</h1>",
           f"<p><em>{html.escape(header)}</em></p>"]
  for section in table.sections:
    parts += [f"<h2>{html.escape(section.title)}</h2>", f"<p>{html.escape(section.note)}</p>",
              _display_frame(section).to_html(index=False, border=0, escape=True)]
  return "\n".join(parts) + "\n"


_WRITERS = {"md": to_markdown, "csv": to_csv, "tex": to_tex, "html": to_html}


def parse_formats(text: str) -> tuple[str, ...]:
  formats = tuple(f.strip() for f in text.split(",") if f.strip())
  unknown = [f for f in formats if f not in FORMATS]
  if unknown or not formats:
    raise InputError(f"unknown format(s) {', '.join(unknown) or '(none)'}; choose from "
                     f"{', '.join(FORMATS)}", field="--format")
  return formats


def render_tables(*, runs_dir, formats: Sequence[str] = ("md",), out_dir,
                  specs_dir=SPECS_DIR, reported_path=REPORTED_PATH, command: str | None = None,
                  echo: bool = False) -> list[Path]:
  """Writes TABLE.{format} for every spec (and the sweep plot); returns the paths written.

  `command` is what the files say made them; by default the `realm-bench tables` call that
  would remake them. The runs folder is printed as given, so relative paths stay relative.
  """
  formats = parse_formats(",".join(formats))
  out_dir = Path(out_dir)
  reported = load_reported(reported_path)
  specs = load_specs(specs_dir, reported)
  frame = load_frame(runs_dir)
  if command is None:
    command = (f"realm-bench tables --runs {shlex.quote(str(runs_dir))} --format "
               f"{','.join(formats)} --out {shlex.quote(str(out_dir))}")
  header = (f"Generated by `{command}` from the run records in {runs_dir}; "
            f"do not edit by hand.")
  written = []
  for table in build_tables(frame=frame, specs=specs, reported=reported):
    for fmt in formats:
      path = out_dir / f"{table.spec.id}.{fmt}"
      atomic_write_text(path, _WRITERS[fmt](table, header))
      written.append(path)
    if table.sweep_points is not None and not table.sweep_points.empty:
      from realm_bench.reporting import plots  # matplotlib only when there is a sweep to draw
      written.append(plots.plot_sweep(
          table.sweep_points, path=out_dir / f"{table.spec.id}.png", spec=table.spec,
          caption=header))
    if echo:
      print(to_markdown(table, header))
  return written


def cli_main(args, gin_bindings) -> int:
  if gin_bindings:
    raise InputError("`tables` takes no --gin bindings (it reads run records only)")
  written = render_tables(runs_dir=args.runs, formats=parse_formats(args.format),
                          out_dir=args.out, echo=True)
  print(f"wrote {len(written)} file(s) under {args.out}", file=sys.stderr)
  return 0
