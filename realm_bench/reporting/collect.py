"""Run records → one tidy pandas frame, and the selection rules every table and verdict uses.

One row per (record, metric), so a table cell is a filter plus a mean, and repeated runs of
the same cell (seeds) are averaged with their count shown rather than one silently winning.
A record's `params` and `stats` columns include those of its lineage (the training runs it
descends from, joined by run_id, nearer runs winning), so an evaluation's row carries the
refresh interval and staleness of the pre-training behind it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting.records import RECORD_NAME, read_record

BASE_COLUMNS = ("run_id", "kind", "experiment", "task", "dataset", "split", "scale", "metric", "value",
                "num_examples", "steps", "recall_matcher", "cells", "path")


def _flatten(prefix: str, obj: Mapping) -> dict:
  """{"a": {"b": 1}} → {"prefix.a.b": 1}; lists become tuples so columns stay hashable."""
  out = {}
  for key, value in obj.items():
    name = f"{prefix}.{key}"
    if isinstance(value, Mapping):
      out.update(_flatten(name, value))
    else:
      out[name] = tuple(value) if isinstance(value, list) else value
  return out


def collect_records(runs_dir) -> pd.DataFrame:
  """Reads every `record.json` under runs_dir (recursively); a bad record raises InputError."""
  runs_dir = Path(runs_dir)
  if not runs_dir.exists():
    raise InputError("runs folder does not exist", path=runs_dir)
  if not runs_dir.is_dir():
    raise InputError("runs path is not a folder", path=runs_dir)
  loaded, seen = [], {}
  for path in sorted(runs_dir.rglob(RECORD_NAME)):
    record = read_record(path)
    if record.run_id in seen:
      # A copied run folder would otherwise count twice in a mean and in n.
      raise InputError(f"run_id {record.run_id!r} is also used by {seen[record.run_id]}",
                       path=path, field="run_id")
    seen[record.run_id] = path
    loaded.append((path, record))
  by_id = {record.run_id: record for _, record in loaded}
  rows, extra_columns = [], set()
  for path, record in loaded:
    params, stats = joined_params_and_stats(record, by_id)
    extra = {**_flatten("params", params), **_flatten("stats", stats)}
    extra_columns.update(extra)
    cells = tuple(sorted((c["table"], c["row"], c["dataset"], c["metric"])
                         for c in record.cells))
    for metric, value in sorted(record.metrics.items()):
      rows.append({
          "run_id": record.run_id, "kind": record.kind, "experiment": record.experiment,
          "task": record.task, "dataset": record.dataset, "split": record.split,
          "scale": record.scale, "metric": metric, "value": float(value),
          "num_examples": record.num_examples, "steps": record.steps,
          "recall_matcher": record.recall_matcher, "cells": cells, "path": str(path), **extra,
      })
  return pd.DataFrame(rows, columns=[*BASE_COLUMNS, *sorted(extra_columns)])


def joined_params_and_stats(record, by_id: Mapping) -> tuple[dict, dict]:
  """`record`'s params and stats over those of its lineage; the nearest run wins a clash."""
  chain, run_id = [], record.lineage
  while run_id is not None and run_id in by_id and run_id not in {r.run_id for r in chain}:
    chain.append(by_id[run_id])
    run_id = by_id[run_id].lineage
  params, stats = {}, {}
  for ancestor in reversed(chain):
    params.update(ancestor.params)
    stats.update(ancestor.stats)
  return {**params, **record.params}, {**stats, **record.stats}


def _answers(cells: tuple, table: str | None, row: int | None, dataset: str,
             metric: str) -> bool:
  """A record that lists cells counts only for those cells; one that lists none, for all."""
  return not cells or any(
      c_dataset == dataset and c_metric == metric and table in (None, c_table)
      and row in (None, c_row) for c_table, c_row, c_dataset, c_metric in cells)


def select(frame: pd.DataFrame, *, experiment: str, scale: str, dataset: str, split: str,
           metric: str, params: Mapping | None = None, table: str | None = None,
           row: int | None = None) -> pd.DataFrame:
  """Rows of `frame` that answer one cell: experiment, scale, dataset, split, metric and,
  when given, run parameters (`params.KEY == VALUE`) and the table/row the records list."""
  mask = ((frame["kind"] != "train") & (frame["experiment"] == experiment)
          & (frame["scale"] == scale)
          & (frame["dataset"] == dataset) & (frame["split"] == split)
          & (frame["metric"] == metric))
  for key, value in (params or {}).items():
    column = f"params.{key}"
    if column not in frame.columns:
      return frame.iloc[0:0]
    mask &= frame[column] == value
  picked = frame[mask]
  keep = picked["cells"].map(lambda cells: _answers(cells, table, row, dataset, metric))
  return picked[keep.astype(bool)]


def mean_and_count(values: pd.Series) -> tuple[float | None, int]:
  """The cell a table shows: mean over repeated runs, and how many runs it averages."""
  n = int(values.count())
  return (float(values.mean()) if n else None), n
