"""Open-QA tasks: NQ-Open, WebQuestions and CuratedTREC, real and synthetic twins.

Each dataset's metric is fixed here, at registration, from one spec table, so evaluation never
decides by a dataset's name how to score it: CuratedTREC's answers are regular expressions
matched at the start of the prediction, the others use the official exact match. The metric
and postprocess functions live in `realm_bench.tasks.metrics` and are bound by qualified name,
imported on first call, so registering tasks does not depend on that module loading.

Examples: `inputs` ([CLS] question [SEP], int32, at most QUERY_LEN), `question` (string),
`answers` (string vector, every gold kept: a question is right when any gold matches), and
`targets_pretokenized` / `targets` (the first gold, as text and as wordpieces without specials,
at most sequence_length["targets"]), the features `seqio.Evaluator` and seqio's feature
converters expect; `qa_postprocess` still scores against every gold in `answers`.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import seqio

from realm_bench.errors import InputError
from realm_bench.tasks import data
from realm_bench.tasks import preprocessors

METRICS_MODULE = "realm_bench.tasks.metrics"


@dataclasses.dataclass(frozen=True)
class OpenQASpec:
  name: str      # task name suffix
  folder: str    # ROOT/open_qa/<folder>/
  metric: str    # metric function in METRICS_MODULE
  title: str
  dataset: str   # what run records and tables call it


SPECS = (
    OpenQASpec("nq_open", "nq", "exact_match_metric", "NQ-Open", "nq"),
    OpenQASpec("web_questions", "wq", "exact_match_metric", "WebQuestions", "wq"),
    OpenQASpec("curated_trec", "trec", "regex_match_metric", "CuratedTREC (regex answers)", "ct"),
)


class _ByName:
  """A function named by module and attribute, imported when first called."""

  def __init__(self, qualified_name: str):
    self.qualified_name = qualified_name
    self.__name__ = qualified_name.rpartition(".")[2]

  def resolve(self):
    module, _, attr = self.qualified_name.rpartition(".")
    return getattr(importlib.import_module(module), attr)

  def __repr__(self):
    return f"{type(self).__name__}({self.qualified_name!r})"


class MetricByName(_ByName):
  """seqio metric_fn: its (targets, predictions) signature is what seqio inspects."""

  def __call__(self, targets, predictions):
    return self.resolve()(targets, predictions)


class PostprocessByName(_ByName):

  def __call__(self, output_or_target: Any, example=None, is_target: bool = False):
    return self.resolve()(output_or_target, example=example, is_target=is_target)


def task_name_of(spec: OpenQASpec, kind: str) -> str:
  return f"realm_bench.{'synthetic.' if kind == 'world' else ''}{spec.name}"


def make_task(spec: OpenQASpec, kind: str) -> seqio.Task:
  """kind: "world" (WORLD_DIR, synthetic twin) or "data" (DATA_DIR, real data)."""
  source = data.RootedSource(
      kind=kind, files=f"open_qa/{spec.folder}/{{train,dev,test}}.jsonl|tsv",
      make=lambda root, split: data.open_qa_dataset(root, spec.folder, split, kind=kind),
      splits=tuple(data.SPLIT_FILES))
  return seqio.Task(
      task_name_of(spec, kind),
      source=source,
      output_features={"inputs": preprocessors.token_feature(),
                       "targets": preprocessors.token_feature()},
      preprocessors=[preprocessors.tokenize_query, preprocessors.first_answer_as_targets],
      postprocess_fn=PostprocessByName(f"{METRICS_MODULE}.qa_postprocess"),
      metric_fns=[MetricByName(f"{METRICS_MODULE}.{spec.metric}")])


def make_tasks() -> list[seqio.Task]:
  return [make_task(spec, kind) for kind in ("world", "data") for spec in SPECS]


def spec_of(task_name: str) -> OpenQASpec:
  for spec in SPECS:
    if task_name in (task_name_of(spec, "world"), task_name_of(spec, "data")):
      return spec
  raise InputError(f"{task_name!r} is not an Open-QA task (known: "
                   f"{', '.join(t.name for t in make_tasks())})", field="qa_task")


def answers_are_regex(task_name: str) -> bool:
  """Whether a task's answers are regular expressions (CuratedTREC), read from the metric it
  registers with, so batching, Recall@k and scoring cannot disagree with the task."""
  return spec_of(task_name).metric == "regex_match_metric"
