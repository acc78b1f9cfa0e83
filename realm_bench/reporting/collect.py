"""Run records → one tidy pandas frame, and the selection rules every table and verdict uses.

One row per (record, metric), so a table cell is a filter plus a mean, and repeated runs of
the same cell (seeds) are averaged with their count shown rather than one silently winning.
A record's `params` and `stats` columns include those of its lineage (the training runs it
descends from, joined by run_id, nearer runs winning), so an evaluation's row carries the
refresh interval and staleness of the pre-training behind it.

Seeds: a run's id is its folder's name, so the runs of one seed share a folder
(`quickstart --out OUT` writes OUT/runs/realm_eval_test, ...) and another seed's runs carry
the same ids in another folder. That folder, relative to the runs folder, is the row's
`replicate` ("." when the runs sit directly in it): lineage is resolved within it first, and
`check` pairs two systems' runs by it (same seed, same questions). A record found twice with
identical contents is a copied folder and refused, since it would count twice in a mean.

The row of the metric a record's per-question `outcomes` belong to (an evaluation's
exact_match, a recall run's one recall@k) carries them in the `outcomes` column, when they
reproduce the metric's value; every other row has None.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Mapping

import pandas as pd

from realm_bench.errors import InputError
from realm_bench.reporting.records import RECORD_NAME, RunRecord, read_record

BASE_COLUMNS = ("run_id", "kind", "experiment", "task", "dataset", "split", "scale", "metric", "value",
                "num_examples", "steps", "recall_matcher", "cells", "path", "replicate",
                "outcomes")


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


@dataclasses.dataclass(frozen=True)
class Loaded:
  """A record and where it was found: its file, and its seed's folder (`replicate`)."""
  path: Path
  replicate: str
  record: RunRecord


def _replicate(path: Path, runs_dir: Path) -> str:
  """The folder holding the record's run folder, relative to runs_dir ("." at the top)."""
  folder = path.parent.parent
  if path.parent == runs_dir or not folder.is_relative_to(runs_dir):
    return "."
  return folder.relative_to(runs_dir).as_posix()


def read_records(runs_dir) -> list[Loaded]:
  """Every `record.json` under runs_dir (recursively), validated; a bad record, two runs of
  one id in one seed's folder, or a copied run folder raise InputError."""
  runs_dir = Path(runs_dir)
  if not runs_dir.exists():
    raise InputError("runs folder does not exist", path=runs_dir)
  if not runs_dir.is_dir():
    raise InputError("runs path is not a folder", path=runs_dir)
  loaded, seen = [], {}
  for path in sorted(runs_dir.rglob(RECORD_NAME)):
    here = Loaded(path=path, replicate=_replicate(path, runs_dir), record=read_record(path))
    for other in seen.get(here.record.run_id, ()):
      if other.replicate == here.replicate or other.record == here.record:
        # A copied run folder would otherwise count twice in a mean and in n.
        raise InputError(f"run_id {here.record.run_id!r} is also used by {other.path}"
                         + (" (an identical copy)" if other.record == here.record else ""),
                         path=path, field="run_id")
    seen.setdefault(here.record.run_id, []).append(here)
    loaded.append(here)
  return loaded


class Lineages:
  """Finds a run's ancestors: the run of that id in the same seed's folder, else the only run
  of that id anywhere (an ICT warm start shared by every seed, say)."""

  def __init__(self, loaded: list[Loaded]):
    self._here = {(x.replicate, x.record.run_id): x for x in loaded}
    self._any: dict[str, list[Loaded]] = {}
    for x in loaded:
      self._any.setdefault(x.record.run_id, []).append(x)

  def parent(self, of: Loaded) -> Loaded | None:
    run_id = of.record.lineage
    if run_id is None:
      return None
    found = self._here.get((of.replicate, run_id))
    if found is None and len(self._any.get(run_id, ())) == 1:
      found = self._any[run_id][0]
    return found

  def ancestors(self, of: Loaded) -> list[Loaded]:
    """Nearest first; stops at a cycle or at an id not found."""
    chain, seen = [], {id(of)}
    parent = self.parent(of)
    while parent is not None and id(parent) not in seen:
      chain.append(parent)
      seen.add(id(parent))
      parent = self.parent(parent)
    return chain


def outcome_metric(record: RunRecord) -> str | None:
  """The metric a record's per-question outcomes score: an evaluation's exact match, or the
  recall@k of a recall run that measured one k. None without outcomes or when ambiguous."""
  if record.outcomes is None:
    return None
  if record.kind == "evaluate" and "exact_match" in record.metrics:
    return "exact_match"
  recalls = [m for m in record.metrics if m.startswith("recall@")]
  if record.kind == "recall" and len(recalls) == 1:
    return recalls[0]
  return None


def _outcomes_of(record: RunRecord, metric: str) -> str | None:
  """The outcomes, if they belong to `metric` and their mean reproduces its value."""
  if metric != outcome_metric(record) or not record.outcomes:
    return None
  share = 100.0 * record.outcomes.count("1") / len(record.outcomes)
  return record.outcomes if abs(share - record.metrics[metric]) < 1e-6 else None


def collect_records(runs_dir) -> pd.DataFrame:
  """Reads every `record.json` under runs_dir (recursively); a bad record raises InputError."""
  loaded = read_records(runs_dir)
  lineages = Lineages(loaded)
  rows, extra_columns = [], set()
  for item in loaded:
    record = item.record
    ancestors = [a.record for a in lineages.ancestors(item)]
    params, stats = joined_params_and_stats(record, ancestors)
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
          "recall_matcher": record.recall_matcher, "cells": cells, "path": str(item.path),
          "replicate": item.replicate, "outcomes": _outcomes_of(record, metric), **extra,
      })
  return pd.DataFrame(rows, columns=[*BASE_COLUMNS, *sorted(extra_columns)])


def joined_params_and_stats(record, ancestors) -> tuple[dict, dict]:
  """`record`'s params and stats over those of its ancestors (nearest first), the nearest
  run winning a clash."""
  params, stats = {}, {}
  for ancestor in reversed(list(ancestors)):
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
