"""`evaluate` and `evaluate_retrieval`: run records for the leaderboard tables.

`evaluate` scores a fine-tuned Open-QA run on a split with the metric functions bound to the
seqio task (exact match, or regex match for CuratedTREC). `evaluate_retrieval` measures a
retriever zero-shot, before any fine-tuning: Recall@k of its top-k blocks, as Table 2 reports.
Both write `record.json` (plus predictions / retrievals JSONL) into their own run directory,
with the gin config, commit and the index manifests used beside the numbers.
"""
from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Sequence

import gin

from realm_bench import checkpoints, features, gin_utils
from realm_bench.infer import load_finetuned, predict_answers
from realm_bench.inputs import OpenQAPipeline, load_corpus, query_len, task_examples
from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.reporting.records import RunRecord, git_commit, hardware_info, write_record
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex
from realm_bench.tasks import metrics as qa_metrics
from realm_bench.tasks.data import SPLIT_FILES
from realm_bench.train import SUMMARY

def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def lineage(run_dir) -> list[dict]:
  """The training summaries of a run and of every run it warm-started from, newest first."""
  out, seen = [], set()
  path = Path(run_dir) if run_dir else None
  while path is not None and (path / SUMMARY).exists() and path not in seen:
    seen.add(path)
    summary = json.loads((path / SUMMARY).read_text())
    out.append(summary)
    path = Path(summary["warm_start_from"]) if summary.get("warm_start_from") else None
  return out


def _lineage_stats(chain: list[dict]) -> tuple[dict, dict, list[dict], int]:
  """What a table needs from the training runs: (stats, params, index manifests, steps)."""
  stats, params, manifests = {}, {}, []
  for summary in chain:
    pipe = summary.get("pipeline") or {}
    for key in ("staleness_mean", "staleness_max", "num_refreshes", "refresh_seconds_mean",
                "refresh_seconds_max", "refresh_wait_seconds", "refresh_overhead_seconds",
                "builder_restarts"):
      if key in pipe:
        stats[key] = pipe[key]
    if "refresh_every_steps" in pipe:   # the sweep's row key
      params["refresh_every_steps"] = pipe["refresh_every_steps"]
    manifests += pipe.get("index_manifests", [])
    if pipe.get("index"):
      manifests.append(pipe["index"])
  return stats, params, manifests, sum(s.get("steps", 0) for s in chain)


def _record(*, run_dir, experiment, task, dataset, split, scale, cells, metrics, num_examples,
            chain, params, extra_stats=None, recall_matcher=None, started,
            index_manifest=None):
  stats, lineage_params, manifests, steps = _lineage_stats(chain)
  if index_manifest is not None:
    manifests.append(dict(index_manifest))
  stats.update(extra_stats or {})
  params = {**lineage_params, **(params or {})}
  record = RunRecord(
      run_id=Path(run_dir).name, experiment=experiment, cells=list(cells), task=task,
      dataset=dataset, split=SPLIT_FILES.get(split, split), scale=scale, metrics=metrics,
      num_examples=num_examples, gin_config=gin.config_str(), git_commit=git_commit(),
      hardware=hardware_info(), start_time=started, end_time=_now(), steps=steps,
      index_manifests=manifests, params=params, stats=stats, recall_matcher=recall_matcher)
  gin_utils.write_config(run_dir)
  return write_record(run_dir, record)


def evaluate(*, model, pipeline: OpenQAPipeline, checkpoint_from: str, run_dir: str,
             experiment: str, dataset: str, split: str = "test", scale: str = "synthetic",
             cells: Sequence[dict] = (), params: dict | None = None,
             batch_size: int = 32) -> dict:
  """Open-QA exact match of a fine-tuned run; returns the metrics it recorded."""
  import seqio  # pylint: disable=g-import-not-at-top
  started = _now()
  run_dir = Path(run_dir)
  params_tree = load_finetuned(model=model, pipeline=pipeline, checkpoint_from=checkpoint_from)
  examples = pipeline.examples(split)
  rows = predict_answers(model=model, pipeline=pipeline, params=params_tree,
                         examples=examples, batch_size=batch_size)
  task = seqio.get_mixture_or_task(pipeline.qa_task)
  targets = [r["answers"] for r in rows]
  predictions = [r["prediction"] for r in rows]
  metrics = {}
  for fn in task.metric_fns:
    metrics.update(fn(targets, predictions))
  atomic_write_jsonl(run_dir / f"predictions_{split}.jsonl",
                     [{"question": r["question"], "prediction": r["prediction"]} for r in rows])
  recall = qa_metrics.recall_at_k(
      [[pipeline.corpus.bodies[pipeline.corpus.row_of[b]] for b in r["retrieved"]]
       for r in rows], targets, k=pipeline.num_read,
      matcher="regex" if pipeline.regex_answers else "string")
  _record(run_dir=run_dir, experiment=experiment, task=pipeline.qa_task, dataset=dataset,
          split=split, scale=scale, cells=cells, metrics=metrics, num_examples=len(rows),
          chain=lineage(checkpoint_from), params=params, started=started,
          extra_stats={f"finetuned_recall@{pipeline.num_read}": 100.0 * recall,
                       "empty_predictions": sum(not p for p in predictions)})
  return metrics


def evaluate_retrieval(*, model, checkpoint_from: str, run_dir: str, experiment: str,
                       dataset: str, qa_task: str, corpus_task: str, split: str = "validation",
                       scale: str = "synthetic", k: int = 5, matcher: str = "string",
                       cells: Sequence[dict] = (), params: dict | None = None) -> dict:
  """Zero-shot Recall@k: embed the corpus with the run's document tower, search with its
  query tower, count questions whose answer occurs in a top-k block (ORQA's raw string match
  by default; the record names the matcher)."""
  started = _now()
  run_dir = Path(run_dir)
  # Only the retriever is needed, whatever model the run trained.
  params_tree = {"retriever": checkpoints.load_params(
      Path(checkpoint_from) / "checkpoints")["retriever"]}
  corpus = load_corpus(corpus_task)
  towers = Towers(model)
  index = ExactIndex()
  index.build(towers.embed_docs(params_tree, corpus.doc_inputs), corpus.ids,
              manifest={"embedder_step": "checkpoint", "checkpoint_from": str(checkpoint_from)})
  examples = task_examples(qa_task, split)
  query_ids = features.pad_rows([e["inputs"] for e in examples], query_len())
  _, retrieved = index.search(towers.embed_queries(params_tree, query_ids), k)
  answers = [[qa_metrics.to_text(a) for a in e["answers"]] for e in examples]
  blocks = [[corpus.bodies[corpus.row_of[int(b)]] for b in row] for row in retrieved]
  recall = qa_metrics.recall_at_k(blocks, answers, k=k, matcher=matcher)
  atomic_write_jsonl(run_dir / f"retrieved_{split}.jsonl",
                     [{"question": qa_metrics.to_text(e["question"]),
                       "retrieved": [int(b) for b in row]}
                      for e, row in zip(examples, retrieved)])
  metrics = {f"recall@{k}": 100.0 * recall}
  _record(run_dir=run_dir, experiment=experiment, task=qa_task, dataset=dataset, split=split,
          scale=scale, cells=cells, metrics=metrics, num_examples=len(examples),
          chain=lineage(checkpoint_from), params=params, started=started,
          recall_matcher=matcher, index_manifest=index.manifest)
  return metrics
