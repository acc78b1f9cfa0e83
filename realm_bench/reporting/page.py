"""The leaderboard page (`realm-bench tables --format html` writes OUT/leaderboard.html).

In the style of pyserini's two-click reproductions: one self-contained page (inline style, no
script, nothing fetched), the paper's tables with their row grouping, each of our cells as mean
± its 95% interval and n beside the paper's number, the check's verdict on every row, and
under every row a collapsed block with what its run records say about how they were made (the
commit, the `realm-bench` command of each stage oldest first, and its full gin config):
expand, copy. A record written before records kept their command (schema version 3) has
none; its stage is named by its kind, not given invented flags.
Every number is read from the built tables and the verdicts, which are read from run records;
every piece of text is escaped. Cells carry `data-*` attributes (spec, section, experiment,
column, field, and a sweep's point) so a program, or a test, can read the page back.
"""
from __future__ import annotations

import base64
import dataclasses
import html
import math
import shlex
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from realm_bench.reporting import collect
from realm_bench.reporting.build import BuiltTable, reference_note
from realm_bench.reporting.check import fmt_interval, fmt_mean
from realm_bench.reporting.records import shell_quote
from realm_bench.reporting.specs import SweepSpec, TableSpec, TrendClaim

PAGE_NAME = "leaderboard.html"

_STYLE = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;
  max-width:78em;padding:0 1em;color:#1b1f23;background:#fff}
h1{font-size:1.55em;margin-bottom:.2em}h2{margin-top:2.2em;border-bottom:2px solid #d0d7de}
code,pre{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.meta{color:#57606a}.legend{background:#f6f8fa;border:1px solid #d0d7de;padding:.6em .9em}
table{border-collapse:collapse;margin:.8em 0;width:100%}
th,td{padding:.3em .55em;border-bottom:1px solid #eaeef2;vertical-align:top}
thead th{background:#f6f8fa;border-bottom:2px solid #d0d7de;text-align:center}
th.sys,td.sys{text-align:left;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.n{color:#57606a}td.paper{color:#8250df}
tr.group th{text-align:left;background:#eef1f4;font-weight:600}
tr.repro td{border-bottom:1px solid #d0d7de;padding-top:0}
details summary{cursor:pointer;color:#0969da;font-size:.9em}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:.6em;overflow-x:auto;
  max-height:28em}
pre.cmd{user-select:all}
.v{display:inline-block;border-radius:3px;padding:0 .4em;font-size:.8em;font-weight:600;
  margin:.1em .2em .1em 0;color:#fff}
.v-PASS,.v-OK{background:#1a7f37}.v-OKx{background:#4ac26b}.v-FAIL{background:#cf222e}
.v-INCONCLUSIVE{background:#9a6700}.v-MISSING{background:#8c959f}
.claim{font-size:.85em;display:block}
img{max-width:100%;border:1px solid #d0d7de}
"""


def _e(text) -> str:
  return html.escape("" if text is None else str(text), quote=True)


def _missing(value) -> bool:
  return value is None or value is pd.NA or isinstance(value, float) and math.isnan(value)


def _num(value, digits: int = 1) -> str:
  return "—" if _missing(value) else f"{float(value):.{digits}f}"


def _badge(verdict: str, label: str = "", title: str = "") -> str:
  css = "OKx" if verdict == "OK~" else verdict
  tip = f' title="{_e(title)}"' if title else ""
  return (f'<span class="claim"><span class="v v-{_e(css)}"{tip}>{_e(verdict)}</span>'
          f'{_e(label)}</span>')


@dataclasses.dataclass(frozen=True, kw_only=True)
class PageInputs:
  """Everything the page is drawn from; all of it comes from the run records."""
  tables: Sequence[BuiltTable]
  verdicts: pd.DataFrame
  frame: pd.DataFrame
  reported: Mapping
  runs_dir: Path
  command: str
  commit: str
  plots: Mapping[str, Path]   # spec id -> its PNG, embedded


# --- the records behind a row, and how they were made -----------------------------------------


def _wrapped(command: str) -> str:
  """One flag a line (backslash continuations), so a long stage command reads down the page
  and still pastes into a shell as it is; kept as recorded if it does not split."""
  try:
    words = shlex.split(command)
  except ValueError:
    return command
  lines: list[list[str]] = []
  for word in words:
    if not lines or word.startswith("--"):
      lines.append([])
    lines[-1].append(shell_quote(word))
  return " \\\n    ".join(" ".join(line) for line in lines)


class _Provenance:
  """Reads each record once and finds its lineage, for the rows' reproduce blocks."""

  def __init__(self, runs_dir: Path):
    self.runs_dir = Path(runs_dir)
    loaded = collect.read_records(runs_dir) if self.runs_dir.is_dir() else []
    self.by_path = {str(x.path): x for x in loaded}
    self.lineages = collect.Lineages(loaded)

  def where(self, item: collect.Loaded) -> str:
    """The record's run folder relative to the runs folder: no machine paths on the page."""
    try:
      return item.path.parent.relative_to(self.runs_dir).as_posix()
    except ValueError:
      return item.path.parent.name

  def block(self, paths: Sequence[str]) -> str:
    items = [self.by_path[p] for p in dict.fromkeys(paths) if p in self.by_path]
    if not items:
      return ""
    commits = sorted({x.record.git_commit for x in items})
    seeds = sorted({x.replicate for x in items})
    summary = (f"Reproduce: {len(items)} run record(s) in {len(seeds)} seed folder(s); "
               f"commit {', '.join(c[:12] for c in commits)}")
    parts = [f"<details><summary>{_e(summary)}</summary>",
             "<p>A run record holds its run's command, full gin config and commit. Below, "
             "per record: the commit to check out, then the stages behind it oldest first, "
             "each with its run folder and the <code>realm-bench</code> command that "
             "reproduces it (the command line it was started with, or for a stage of "
             "<code>quickstart</code>, <code>sweep</code> or <code>reproduce</code> the "
             "equivalent <code>train</code>, <code>evaluate</code> or <code>recall</code> "
             "call), to run from the folder the run was started in; then each stage's "
             "recorded config. Records older than commands name only their stage's kind; "
             "<code>realm-bench quickstart</code> and <code>sweep</code> rerun whole "
             "lineages.</p>"]
    for item in sorted(items, key=lambda x: (x.replicate, x.record.run_id)):
      parts.append(self._record_block(item))
    parts.append("</details>")
    return "\n".join(parts)

  def _record_block(self, item: collect.Loaded) -> str:
    record = item.record
    stages = [*reversed(self.lineages.ancestors(item)), item]
    commit = record.git_commit
    lines = []
    if commit.endswith("-dirty"):
      lines.append(f"# recorded commit {commit}: the checkout had uncommitted changes")
    lines.append(f"git checkout {commit.removesuffix('-dirty')}")
    lines.append("# stages, oldest first: each one's run folder, then its command")
    for stage in stages:
      if stage.record.command is None:
        lines.append(f"#   realm-bench {stage.record.kind:<9}{self.where(stage)}"
                     "  (recorded before commands were kept)")
      else:
        lines += [f"# {self.where(stage)} ({stage.record.kind})",
                  _wrapped(stage.record.command)]
    metrics = ", ".join(f"{k} = {v:.1f}" for k, v in sorted(record.metrics.items()))
    out = [f"<h4>{_e(self.where(item))} <small>({_e(record.kind)}, {_e(record.dataset)} "
           f"{_e(record.split)}: {_e(metrics)})</small></h4>",
           f'<pre class="cmd">{_e(chr(10).join(lines))}</pre>']
    for stage in stages:
      out.append(f"<details><summary>gin config of {_e(self.where(stage))} "
                 f"({_e(stage.record.kind)}, commit "
                 f"{_e(stage.record.git_commit)})</summary>"
                 f'<pre class="gin">{_e(stage.record.gin_config)}</pre></details>')
    return "\n".join(out)


# --- verdicts -------------------------------------------------------------------------------


def _claim_badges(verdicts: pd.DataFrame, spec, claims, scale: str) -> str:
  badges = []
  for claim in claims:
    rows = verdicts[(verdicts["item"] == f"{spec.id}/{claim.id}")
                    & verdicts["scale"].isin([scale, "any"])]
    for row in rows.to_dict(orient="records"):
      badges.append(_badge(row["verdict"], f" {claim.text}", row["description"]))
  return "".join(badges) or "—"


def _involves(claim, experiment: str, params: Mapping | None = None) -> bool:
  if isinstance(claim, TrendClaim):
    return False
  for side in (claim.better, claim.worse):
    if side.experiment == experiment and all(
        params is not None and params.get(k) == v for k, v in side.params.items()):
      return True
  return False


# --- tables ---------------------------------------------------------------------------------


def _cell(spec_id, section, experiment, col, field, text, css, point=None) -> str:
  where = "" if point is None else f' data-point="{_e(point)}"'
  return (f'<td class="num {css}" data-spec="{_e(spec_id)}" data-section="{_e(section)}" '
          f'data-experiment="{_e(experiment or "")}" data-col="{_e(col)}"{where} '
          f'data-field="{_e(field)}">{_e(text)}</td>')


def _paths(frame, experiment, scale, cells, table=None, row_number=None,
           params=None) -> list[str]:
  """The record files behind a row: every (dataset, split, metric) in `cells`."""
  paths = []
  for dataset, split, metric in cells:
    picked = collect.select(frame, experiment=experiment, scale=scale, dataset=dataset,
                            split=split, metric=metric, table=table, row=row_number,
                            params=params)
    paths += picked["path"].tolist()
  return paths


def _table_spec(spec: TableSpec, built: BuiltTable, inputs: PageInputs,
                provenance: _Provenance) -> str:
  width = 2 + 3 * max(len(spec.columns), len(spec.synthetic_columns))
  heads = "".join(f'<th colspan="3">{_e(c.name)}</th>' for c in spec.columns)
  subs = "".join("<th>ours</th><th>n</th><th>paper</th>" for _ in spec.columns)
  parts = [f'<table class="board" data-spec="{_e(spec.id)}">',
           f'<thead><tr><th class="sys" rowspan="2">System</th>{heads}'
           f'<th rowspan="2">Check</th></tr><tr>{subs}</tr></thead>']
  frames = {s.key: s.frame for s in built.sections}
  sections = [("paper", "Paper scale: the paper's systems, our reruns beside the printed "
               "numbers", spec.rows, spec.columns)]
  if spec.synthetic_rows:
    sections.append(("synthetic", f"Synthetic scale — {spec.synthetic_title} (ours only; the "
                     "paper's number of the row it twins is shown for reference, not "
                     "compared)", spec.synthetic_rows, spec.synthetic_columns))
  for key, title, rows, columns in sections:
    table = frames[key]
    parts.append(f'<tbody data-section="{_e(key)}"><tr class="group"><th colspan="{width}">'
                 f"{_e(title)}</th></tr>")
    for i, row in enumerate(rows):
      shown = table.iloc[i]
      cells = []
      for col in columns:
        paper = (inputs.reported.get((spec.reported_table, row.row, col.dataset, col.split,
                                      col.metric)) if row.row is not None else None)
        ours = fmt_mean(shown[f"{col.name} ours"], shown[f"{col.name} ±"])
        n = shown[f"{col.name} n"]
        cells += [_cell(spec.id, key, row.experiment, col.name, "ours", ours, "ours"),
                  _cell(spec.id, key, row.experiment, col.name, "n",
                        "—" if _missing(n) else int(n), "n"),
                  _cell(spec.id, key, row.experiment, col.name, "paper",
                        _num(None if paper is None else paper.value), "paper")]
      if key == "paper":
        check = "not rerun here" if not row.experiment else "".join(
            _badge(v["verdict"], f" {col.name}", v["description"])
            for col in columns
            for v in inputs.verdicts[inputs.verdicts["item"] == (
                f"{spec.reported_table}#{row.row} {col.name} {row.experiment}")].to_dict(
                    orient="records")) or "—"
      else:
        involved = [c for c in spec.claims if _involves(c, row.experiment)]
        check = _claim_badges(inputs.verdicts, spec, involved, key)
      label = row.label + (f" (row {row.row})" if key == "paper" and row.row else "")
      parts.append(f'<tr class="row" data-experiment="{_e(row.experiment or "")}">'
                   f'<td class="sys">{_e(label)}</td>{"".join(cells)}'
                   f'<td class="check" data-spec="{_e(spec.id)}" data-section="{_e(key)}" '
                   f'data-experiment="{_e(row.experiment or "")}" data-field="check">'
                   f"{check}</td></tr>")
      if row.experiment:
        block = provenance.block(_paths(
            inputs.frame, row.experiment, key,
            [(c.dataset, c.split, c.metric) for c in columns], spec.reported_table, row.row))
        if block:
          parts.append(f'<tr class="repro"><td colspan="{width}">{block}</td></tr>')
    parts.append("</tbody>")
  parts.append("</table>")
  return "\n".join(parts)


def _sweep_spec(spec: SweepSpec, built: BuiltTable, inputs: PageInputs,
                provenance: _Provenance) -> str:
  points = built.sweep_points
  metrics = [c for c in spec.sweep_columns if c.metric is not None]
  stats = [c for c in spec.sweep_columns if c.stat is not None]
  width = 3 + len(metrics) + len(stats)
  heads = "".join(f"<th>{_e(c.name)}</th>" for c in [*metrics, *stats])
  parts = [f'<table class="board" data-spec="{_e(spec.id)}">',
           f"<thead><tr><th>scale</th><th>{_e(spec.param)}</th>{heads}<th>n</th>"
           f"<th>Check</th></tr></thead><tbody>"]
  if points is None or points.empty:
    parts.append(f'<tr><td colspan="{width + 1}">No sweep records yet.</td></tr>')
  for point in ([] if points is None else points.to_dict(orient="records")):
    value, scale = point[spec.param], point["scale"]
    key = f"{scale}:{value}"
    cells = [_cell(spec.id, scale, spec.experiment, c.name, "ours",
                   fmt_mean(point[c.name], point[f"{c.name} ±"]), "ours", key)
             for c in metrics]
    cells += [_cell(spec.id, scale, spec.experiment, c.name, "ours", _num(point[c.name]),
                    "ours", key) for c in stats]
    involved = [c for c in spec.claims if _involves(c, spec.experiment, {spec.param: value})]
    parts.append(f'<tr class="row" data-point="{_e(key)}"><td class="sys">{_e(scale)}</td>'
                 f'<td class="num">{_e(value)}</td>{"".join(cells)}'
                 f'{_cell(spec.id, scale, spec.experiment, "n", "n", point["n"], "n", key)}'
                 f'<td class="check">{_claim_badges(inputs.verdicts, spec, involved, scale)}'
                 f"</td></tr>")
    block = provenance.block(_paths(
        inputs.frame, spec.experiment, scale,
        [(spec.dataset, spec.split, c.metric) for c in metrics], params={spec.param: value}))
    if block:
      parts.append(f'<tr class="repro"><td colspan="{width + 1}">{block}</td></tr>')
  parts.append("</tbody></table>")
  if built.sweep_references is not None and points is not None:
    for scale in dict.fromkeys(points["scale"]):
      note = reference_note(spec, built.sweep_references, scale)
      if note:
        parts.append(f'<p class="refs" data-scale="{_e(scale)}">{_e(scale)}: {_e(note)}</p>')
  trends = [c for c in spec.claims if isinstance(c, TrendClaim)]
  if trends:
    parts.append(f"<p>Trend over the sweep: "
                 f"{_claim_badges(inputs.verdicts, spec, trends, 'synthetic')}</p>")
  plot = inputs.plots.get(spec.id)
  if plot is not None and Path(plot).is_file():
    data = base64.b64encode(Path(plot).read_bytes()).decode("ascii")
    parts.append(f'<p><img alt="{_e(spec.title)}" src="data:image/png;base64,{data}"></p>')
  return "\n".join(parts)


def _claims_table(spec, verdicts: pd.DataFrame) -> str:
  rows = verdicts[(verdicts["spec"] == spec.id) & (verdicts["kind"] == "claim")]
  if rows.empty:
    return ""
  out = ['<table class="claims"><thead><tr><th class="sys">Claim</th><th>scale</th>'
         "<th>ours</th><th>Δ</th><th>95% interval / p</th><th>n</th><th>how</th>"
         "<th>Check</th></tr></thead><tbody>"]
  for r in rows.to_dict(orient="records"):
    trend = _missing(r["tol"])
    ours = ("—" if _missing(r["ours"]) else f"r {r['ours']:+.2f}") if trend else (
        f"{fmt_mean(r['ours'], r['ours_pm'])} vs {fmt_mean(r['baseline'], r['baseline_pm'])}")
    interval = (f"p = {_num(r['p_value'], 3)}" if trend
                else fmt_interval(r["ci_low"], r["ci_high"]))
    how = "; ".join(t for t in (r["method"], r["note"]) if t)
    delta = "—" if _missing(r["delta"]) else f"{r['delta']:+.1f}"
    out.append(f'<tr data-item="{_e(r["item"])}" data-scale="{_e(r["scale"])}">'
               f'<td class="sys">{_e(r["description"])}</td><td>{_e(r["scale"])}</td>'
               f'<td class="num">{_e(ours)}</td>'
               f'<td class="num">{_e(delta)}</td>'
               f'<td class="num">{_e(interval)}</td><td class="num n">{int(r["n"])}</td>'
               f"<td><small>{_e(how)}</small></td><td>{_badge(r['verdict'])}</td></tr>")
  out.append("</tbody></table>")
  return "\n".join(out)


def render_page(inputs: PageInputs) -> str:
  provenance = _Provenance(inputs.runs_dir)
  counts = inputs.verdicts["verdict"].value_counts()
  tally = ", ".join(f"{int(counts[v])} {v}" for v in ("PASS", "OK", "OK~", "FAIL",
                                                       "INCONCLUSIVE", "MISSING")
                    if v in counts)
  parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>REALM reproduction: leaderboard</title>", f"<style>{_STYLE}</style>",
           "</head><body>",
           "<h1>REALM (Guu et al. 2020): Tables 1 and 2 and the staleness sweep, from run "
           "records</h1>",
           f'<p class="meta">Generated by <code>{_e(inputs.command)}</code> at commit '
           f'<code class="commit">{_e(inputs.commit)}</code> from the run records in '
           f"<code>{_e(inputs.runs_dir)}</code>; "
           f"do not edit by hand. Verdicts: {_e(tally or 'none')}.</p>",
           '<p class="legend">Ours: mean over runs (seeds) ± the half-width of its 95% '
           "t-interval (no ± for a single run); n = runs; paper = the printed number "
           "(results/reported/realm_2020.yaml). Check: a paper-scale cell is OK within its "
           "tolerance of the paper, OK~ within twice it, FAIL beyond; a claim is PASS when the "
           "95% interval of the difference (over seeds and, where records carry per-question "
           "outcomes, a paired bootstrap over questions) lies above zero, FAIL below, "
           "INCONCLUSIVE across it; a sweep's trend by a rank correlation's permutation p; "
           "MISSING: no records. Expand a row's block for the commit and gin config of the "
           "runs behind it.</p>"]
  for built in inputs.tables:
    spec = built.spec
    parts.append(f'<section id="{_e(spec.id)}"><h2>{_e(spec.title)}</h2>')
    if isinstance(spec, TableSpec):
      parts.append(_table_spec(spec, built, inputs, provenance))
    else:
      parts.append(_sweep_spec(spec, built, inputs, provenance))
    claims = _claims_table(spec, inputs.verdicts)
    if claims:
      parts += ["<h3>Claims</h3>", claims]
    parts.append("</section>")
  parts.append("</body></html>")
  return "\n".join(parts) + "\n"
