"""`realm-bench tables`: writing the built tables as Markdown, CSV, LaTeX and HTML.

Every file says which command made it and from which records, and is written atomically.
With `html`, besides each table's fragment, the leaderboard page (page.py): every table, the
check's verdicts and the records' provenance in one self-contained file.
"""
from __future__ import annotations

import html
import math
import shlex
from pathlib import Path
from typing import Sequence

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text
from realm_bench.reporting.build import MISSING, BuiltTable, Section, build_tables, load_frame
from realm_bench.reporting.records import git_commit
from realm_bench.reporting.specs import load_reported, load_specs

FORMATS = ("md", "csv", "tex", "html")


def _display(value, kind: str) -> str:
  if value is None or value is pd.NA or isinstance(value, float) and math.isnan(value):
    return MISSING
  if kind in ("value", "interval"):
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
                  specs_dir=None, reported_path=None, command: str | None = None,
                  echo: bool = False, commit: str | None = None) -> list[Path]:
  """Writes TABLE.{format} for every spec (and the sweep plot, and with `html` the
  leaderboard page); returns the paths written.

  `command` is what the files say made them; by default the `realm-bench tables` call that
  would remake them. The runs folder is printed as given, so relative paths stay relative.
  `commit` is the page's (default: this checkout's HEAD).
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
  written, plots = [], {}
  built = build_tables(frame=frame, specs=specs, reported=reported)
  for table in built:
    for fmt in formats:
      path = out_dir / f"{table.spec.id}.{fmt}"
      atomic_write_text(path, _WRITERS[fmt](table, header))
      written.append(path)
    if table.sweep_points is not None and not table.sweep_points.empty:
      # matplotlib only when there is a sweep to draw
      from realm_bench.reporting import plots as plots_lib  # pylint: disable=g-import-not-at-top
      plots[table.spec.id] = plots_lib.plot_sweep(
          table.sweep_points, path=out_dir / f"{table.spec.id}.png", spec=table.spec,
          caption=header, references=table.sweep_references)
      written.append(plots[table.spec.id])
    if echo:
      print(to_markdown(table, header))
  if "html" in formats:
    from realm_bench.reporting import check, page  # pylint: disable=g-import-not-at-top
    verdicts = check.verdicts_for(frame=frame, specs=specs, reported=reported)
    text = page.render_page(page.PageInputs(
        tables=built, verdicts=verdicts, frame=frame, reported=reported,
        runs_dir=Path(runs_dir), command=command,
        commit=git_commit() if commit is None else commit, plots=plots))
    path = out_dir / page.PAGE_NAME
    atomic_write_text(path, text)
    written.append(path)
  return written
