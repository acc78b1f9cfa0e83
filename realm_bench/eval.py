"""`evaluate` and `evaluate_retrieval`: run records for the leaderboard tables.

`evaluate` scores a fine-tuned Open-QA run on a split with the metric functions bound to the
seqio task (exact match, or regex match for CuratedTREC). `evaluate_retrieval` measures a
retriever zero-shot, before any fine-tuning: Recall@k of its top-k blocks, as Table 2 reports.
Both write `record.json` (plus predictions / retrievals JSONL) into their own run directory,
with the gin config, commit and the index manifest used beside the numbers. Their lineage is
the evaluated run's record, through which the tables find the training history.
"""
from __future__ import annotations

import datetime
from pathlib import Path
from typing import Sequence

import gin

from realm_bench import checkpoints, gin_utils, validate
from realm_bench.errors import InputError
from realm_bench.infer import load_finetuned
from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.metrics_io import MetricsWriter
from realm_bench.pipelines import base, batching, token_file
from realm_bench.pipelines.open_qa import OpenQAPipeline
from realm_bench.reporting.records import (RECORD_NAME, SCALES, RunRecord, git_commit,
                                           hardware_info, read_record, write_record)
from realm_bench.retrieval.embed import Towers, build_index
from realm_bench.retrieval.index import ExactIndex, check_corpus, load_index
from realm_bench.tasks import metrics as qa_metrics
from realm_bench.tasks.data import SPLIT_FILES, SequenceLengths
from realm_bench.tasks.open_qa import answers_are_regex, spec_of


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _evaluated_run(checkpoint_from) -> tuple[str | None, int]:
  """(record id, training steps) of the run being evaluated."""
  if checkpoint_from is None:   # BM25: nothing was trained
    return None, 0
  path = Path(checkpoint_from) / RECORD_NAME
  if not path.exists():
    return None, 0
  record = read_record(path)
  return record.run_id, record.steps


def _record(*, run_dir, kind, experiment, task, dataset, split, scale, cells, metrics,
            num_examples, checkpoint_from, params, extra_stats=None, recall_matcher=None,
            started, index_manifest=None, outcomes=None):
  lineage, steps = _evaluated_run(checkpoint_from)
  record = RunRecord(
      run_id=Path(run_dir).name, kind=kind, experiment=experiment, lineage=lineage,
      cells=list(cells), task=task, dataset=dataset, split=SPLIT_FILES.get(split, split),
      scale=scale, metrics=metrics, num_examples=num_examples, gin_config=gin.config_str(),
      git_commit=git_commit(), hardware=hardware_info(), start_time=started, end_time=_now(),
      steps=steps, index_manifests=[] if index_manifest is None else [dict(index_manifest)],
      params=dict(params or {}), stats=dict(extra_stats or {}), recall_matcher=recall_matcher,
      outcomes=None if outcomes is None else "".join("1" if o else "0" for o in outcomes))
  gin_utils.write_config(run_dir)
  summaries = MetricsWriter(run_dir)
  try:   # the evaluated checkpoint's step, so evaluations line up with its training curve
    summaries.write_summary(steps, scalars={f"{dataset}_{record.split}/{name}": value
                                            for name, value in metrics.items()},
                            texts={"config": "    " + gin.config_str().replace("\n", "\n    ")})
  finally:
    summaries.close()
  return write_record(run_dir, record)


def _check_common(entry: str, *, run_dir, checkpoint_from, experiment, dataset, split,
                  scale) -> None:
  """The arguments every evaluation shares, checked before anything is loaded."""
  validate.text(entry, "run_dir", None if run_dir is None else str(run_dir))
  validate.text(entry, "checkpoint_from",
                None if checkpoint_from is None else str(checkpoint_from))
  validate.text(entry, "experiment", experiment)
  validate.text(entry, "dataset", dataset)
  validate.text(entry, "split", split, choices=tuple(SPLIT_FILES))
  validate.text(entry, "scale", scale, choices=SCALES)


def evaluate(*, model, pipeline: base.Pipeline, checkpoint_from: str, run_dir: str,
             sequence_lengths: SequenceLengths, experiment: str, dataset: str,
             split: str = "test", scale: str = "synthetic", cells: Sequence[dict] = (),
             params: dict | None = None, batch_size: int = 32) -> dict:
  """Open-QA exact match of a fine-tuned run (a retrieve-and-read pipeline such as
  `OpenQAPipeline`, or `ClosedBookPipeline`) over the split's distinct questions, as `score`
  and the official evaluation count them; returns the metrics it recorded."""
  import seqio  # pylint: disable=g-import-not-at-top
  _check_common("evaluate", run_dir=run_dir, checkpoint_from=checkpoint_from,
                experiment=experiment, dataset=dataset, split=split, scale=scale)
  validate.whole("evaluate", "batch_size", batch_size, minimum=1)
  started = _now()
  run_dir = Path(run_dir)
  params_tree = load_finetuned(model=model, pipeline=pipeline, checkpoint_from=checkpoint_from,
                               sequence_lengths=sequence_lengths, split=split)
  examples = pipeline.examples(split)
  lines = pipeline.predictions(model, params_tree, examples, batch_size=batch_size)
  # Scored per distinct question, as the official evaluation counts (CuratedTREC test: 693
  # questions on 694 lines); every line's prediction is still written.
  rows = qa_metrics.by_question(lines)
  task = seqio.get_mixture_or_task(pipeline.qa_task)
  targets = [r["answers"] for r in rows]
  predictions = [r["prediction"] for r in rows]
  metrics = {}
  for fn in task.metric_fns:
    metrics.update(fn(targets, predictions))
  atomic_write_jsonl(run_dir / f"predictions_{split}.jsonl",
                     [{"question": r["question"], "prediction": r["prediction"]} for r in lines])
  stats = {"empty_predictions": sum(not p for p in predictions),
           "repeated_question_lines": len(lines) - len(rows)}
  correct = [qa_metrics.is_correct(p, t, regex=answers_are_regex(pipeline.qa_task))
             for p, t in zip(predictions, targets)]
  if isinstance(pipeline, OpenQAPipeline) and pipeline.retrieve:
    recall = qa_metrics.recall_at_k(
        [[pipeline.corpus.bodies[pipeline.corpus.row(b)] for b in r["retrieved"]]
         for r in rows], targets, k=pipeline.num_read,
        matcher="regex" if pipeline.regex_answers else "string")
    stats[f"finetuned_recall@{pipeline.num_read}"] = 100.0 * recall
  _record(run_dir=run_dir, kind="evaluate", experiment=experiment, task=pipeline.qa_task,
          dataset=dataset, split=split, scale=scale, cells=cells, metrics=metrics,
          num_examples=len(rows), checkpoint_from=checkpoint_from, params=params,
          started=started, extra_stats=stats,
          index_manifest=(pipeline.index_manifest() if isinstance(pipeline, OpenQAPipeline)
                          else None), outcomes=correct)
  return metrics


def _refuse_a_finetuning_run(run: Path) -> None:
  """A fine-tuning run with no frozen index (the BM25 reader, closed-book) holds a retriever
  nothing trained: its recall would be a number about nothing."""
  if not (run / RECORD_NAME).exists():
    return
  task = read_record(run / RECORD_NAME).task
  try:
    spec_of(task)
  except InputError:
    return    # an ICT or pre-training run: its towers are the retriever
  raise InputError(f"a fine-tuning run of {task!r} without a dense index (the BM25 reader or "
                   "closed-book): it has no trained retriever; for BM25's blocks set "
                   "RETRIEVER = 'bm25'", path=run, field="checkpoint_from")


def recall_matcher(qa_task: str, matcher: str | None) -> str:
  """The Recall@k matcher: from the task when not given (regex search where its answers are
  patterns, CuratedTREC; ORQA's raw string match otherwise). One that cannot fit the answers
  is refused: a string matcher counts CuratedTREC's patterns as literal text (nearly no hits)
  and the regex matcher reads other answers as patterns."""
  regex = answers_are_regex(qa_task)
  if matcher is None:
    return "regex" if regex else "string"
  validate.text("evaluate_retrieval", "matcher", matcher, choices=qa_metrics.RECALL_MATCHERS)
  if regex and matcher != "regex":
    raise InputError(f"{qa_task}'s answers are regular expressions: the {matcher!r} matcher "
                     "would look for the patterns as literal text; use 'regex' or leave "
                     "RECALL_MATCHER None", field="matcher")
  if not regex and matcher == "regex":
    raise InputError(f"{qa_task}'s answers are not regular expressions; use 'string' or "
                     "'dpr', or leave RECALL_MATCHER None", field="matcher")
  return matcher


def evaluate_retrieval(*, model, checkpoint_from: str | None, run_dir: str,
                       sequence_lengths: SequenceLengths, experiment: str, dataset: str,
                       qa_task: str, corpus_task: str, split: str = "validation",
                       scale: str = "synthetic", k: int = 5, matcher: str | None = None,
                       retriever: str = "dense", cells: Sequence[dict] = (),
                       params: dict | None = None) -> dict:
  """Recall@k: embed the corpus with the run's document tower, search with its query tower
  (or, `retriever` "bm25", search with BM25 and no checkpoint), count questions whose answer
  occurs in a top-k block. The matcher follows from the task (`recall_matcher`); the record
  names it.

  Of a fine-tuning run (one with a frozen index) the query tower searches that index: the
  document tower is not trained in fine-tuning, the index is what the reader's blocks come
  from. The evaluation's `finetuned_recall@k` counts the same blocks; this record adds what
  paired comparisons and diagnoses need, the per-question outcomes and the retrieved ids."""
  validate.text("evaluate_retrieval", "retriever", retriever, choices=("dense", "bm25"))
  _check_common("evaluate_retrieval", run_dir=run_dir,
                checkpoint_from=checkpoint_from if retriever == "dense" else "unused",
                experiment=experiment, dataset=dataset, split=split, scale=scale)
  validate.whole("evaluate_retrieval", "k", k, minimum=1)
  validate.text("evaluate_retrieval", "qa_task", qa_task)
  validate.text("evaluate_retrieval", "corpus_task", corpus_task)
  matcher = recall_matcher(qa_task, matcher)
  started = _now()
  run_dir = Path(run_dir)
  # Memory-mapped, as fine-tuning and evaluation read it: bounded memory at paper scale.
  corpus = token_file.for_run(corpus_task, sequence_lengths.block, run_dir)
  examples = base.task_examples(qa_task, split, sequence_lengths.for_queries())
  if retriever == "bm25":
    from realm_bench.retrieval.bm25 import Bm25Retriever  # pylint: disable=g-import-not-at-top
    index = Bm25Retriever(zip(corpus.ids.tolist(), corpus.titles, corpus.bodies))
    _, retrieved = index.search([qa_metrics.to_text(e["question"]) for e in examples], k)
  elif retriever == "dense":
    frozen = Path(checkpoint_from) / "index" / "frozen"
    fine_tuned = (frozen / "manifest.json").exists()
    if not fine_tuned:
      _refuse_a_finetuning_run(Path(checkpoint_from))
    # Only the retriever is needed, whatever model the run trained.
    params_tree = {"retriever": checkpoints.load_params(
        Path(checkpoint_from) / "checkpoints")["retriever"]}
    towers = Towers(model)
    if fine_tuned:
      index = load_index(frozen)
      check_corpus(index, corpus.ids, path=frozen, corpus=corpus_task, dim=model.proj_dim)
    else:
      index = build_index(
          embed_fn=lambda ids: towers.embed_doc_batch(params_tree, ids),
          index_factory=ExactIndex,
          manifest={"embedder_step": "checkpoint", "checkpoint_from": str(checkpoint_from)},
          doc_inputs=corpus.doc_inputs, ids=corpus.ids)
    query_ids = batching.pad_rows([e["inputs"] for e in examples], sequence_lengths.query)
    _, retrieved = index.search(towers.embed_queries(params_tree, query_ids), k)
  else:
    raise InputError(f"expected 'dense' or 'bm25', got {retriever!r}", field="retriever")
  answers = [[qa_metrics.to_text(a) for a in e["answers"]] for e in examples]
  blocks = [[corpus.bodies[corpus.row(int(b))] for b in row if b >= 0] for row in retrieved]
  hits = [any(qa_metrics.has_answer(b, a, matcher=matcher) for b in row[:k])
          for row, a in zip(blocks, answers)]
  recall = sum(hits) / max(len(hits), 1)
  atomic_write_jsonl(run_dir / f"retrieved_{split}.jsonl",
                     [{"question": qa_metrics.to_text(e["question"]),
                       "retrieved": [int(b) for b in row if b >= 0]}
                      for e, row in zip(examples, retrieved)])
  metrics = {f"recall@{k}": 100.0 * recall}
  _record(run_dir=run_dir, kind="recall", experiment=experiment, task=qa_task, dataset=dataset,
          split=split, scale=scale, cells=cells, metrics=metrics, num_examples=len(examples),
          checkpoint_from=checkpoint_from, params=params, started=started,
          recall_matcher=matcher, index_manifest=index.manifest, outcomes=hits)
  return metrics
