"""Figures drawn from the aggregated run records (matplotlib, off-screen).

Built on `matplotlib.figure.Figure` rather than pyplot, so drawing a plot neither needs a
display nor changes the global backend of whoever imported us.
"""
from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
from matplotlib import ticker
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from realm_bench.io_utils import atomic_write_bytes


# Axis labels in words for the parameters and statistics sweeps plot against.
AXIS_LABELS = {"refresh_every_steps": "index refresh interval (training steps)",
               "staleness": "mean index staleness (steps behind the model)",
               "mean_staleness": "mean index staleness (steps behind the model)"}


def axis_label(column: str) -> str:
  name = column.split(".")[-1]
  return AXIS_LABELS.get(name, name.replace("_", " "))


def plot_sweep(points: pd.DataFrame, *, path, spec, caption: str,
               references: pd.DataFrame | None = None) -> Path:
  """Draws sweep_figure and writes it as a PNG."""
  figure = sweep_figure(points, spec=spec, caption=caption, references=references)
  buffer = io.BytesIO()
  figure.savefig(buffer, format="png", dpi=120, metadata={"Description": caption})
  path = Path(path)
  atomic_write_bytes(path, buffer.getvalue())
  return path


def sweep_figure(points: pd.DataFrame, *, spec, caption: str,
                 references: pd.DataFrame | None = None) -> Figure:
  """Metric columns of a sweep against the swept parameter (left) and against the measured
  staleness (right): the right panel shows whether the knob moved what it claims to. Error
  bars are the 95% t-intervals over seeds (none for a single seed).

  `references` (build.sweep_references) are dashed horizontal lines, labelled with their
  value: a sweep point means little without where its runs started (the warm start's
  recall, which every pre-training should stay above). Every panel's y axis shows all the
  metric columns, and a reference's metric is one of them (the spec checks), so each line is
  drawn on every panel."""
  metric_columns = [c.name for c in spec.sweep_columns if c.metric is not None]
  stat_columns = [c.name for c in spec.sweep_columns if c.stat is not None]
  figure = Figure(figsize=(10, 4.4), layout="constrained")
  FigureCanvasAgg(figure)
  axes = figure.subplots(1, 1 + bool(stat_columns), squeeze=False)[0]
  panels = [(axes[0], spec.param, axis_label(spec.param))]
  if stat_columns:
    panels.append((axes[1], stat_columns[0], axis_label(stat_columns[0])))
  for ax, x_column, x_label in panels:
    for scale, part in points.groupby("scale", sort=True):
      part = part.sort_values(x_column)
      x = pd.to_numeric(part[x_column], errors="coerce").astype(float)
      for name in metric_columns:
        y = part[name].astype(float)
        ok = x.notna() & y.notna()
        if ok.any():   # error bars: the 95% t-interval over seeds, where there are 2 or more
          pm = (part[f"{name} ±"].astype(float).fillna(0.0) if f"{name} ±" in part.columns
                else None)
          ax.errorbar(x[ok], y[ok], yerr=None if pm is None else pm[ok], marker="o",
                      capsize=3, label=f"{name} ({scale})")
    values = pd.to_numeric(points[x_column], errors="coerce").dropna()
    if len(values) and values.min() > 0 and values.max() >= 10 * values.min():
      ax.set_xscale("log")
      ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
    if x_column == spec.param and len(values):
      ax.set_xticks(sorted(set(values)))
    for i, ref in enumerate([] if references is None else references.to_dict("records")):
      pm = "" if pd.isna(ref["±"]) else f" ± {ref['±']:.1f}"
      ax.axhline(ref["value"], linestyle="--", linewidth=1.2, color=f"C{7 + i % 3}",
                 label=f"{ref['name']} ({ref['scale']}): {ref['metric']} "
                       f"{ref['value']:.1f}{pm}")
    ax.set_xlabel(x_label)
    ax.set_ylabel(", ".join(metric_columns) + " (%)")
    ax.grid(True, alpha=0.3)
    if ax.has_data():
      ax.legend(fontsize="small")
  figure.suptitle(spec.title)
  figure.supxlabel(caption, fontsize="x-small")  # a footer that constrained layout keeps clear
  return figure
