"""The quickstart: REALM against its reference points on the synthetic world, on 2 CPU cores.

  world, vocabulary -> reference points (answer prior, random, BM25, oracle recall)
  BERT stage (masked LM on the pre-training text)
    -> ICT warm start of the retriever (from BERT) -> its zero-shot Recall@5
    -> REALM pre-training (retriever from ICT, reader from BERT, index refreshed as it trains)
       -> its zero-shot Recall@5 -> fine-tuning -> exact match            (REALM)
    -> fine-tuning from the ICT retriever and the BERT reader             (ORQA)
    -> fine-tuning a BERT reader over BM25's blocks                       (BM25 + reader)
    -> fine-tuning BERT to fill in the answer from the question alone     (closed-book)
  -> the summary (every system with its standard error, and REALM's paired differences) and
     the synthetic sections of the tables.

Every stage is one gin-configured call of an entry function (`train`, `evaluate`,
`evaluate_retrieval`) with the same gin files a user would pass on the command line, so the
quickstart is also a worked example of the run layering. Each stage skips itself when its
record exists, so an interrupted quickstart picks up where it stopped.
"""
from __future__ import annotations

import time
from pathlib import Path

from realm_bench import stages as stages_lib
# The stage sizes and the bindings they give, shared with `sweep` and `reproduce`.
from realm_bench.stages import (EXPERIMENTS, QuickstartConfig, Stages, finetune_bindings)  # pylint: disable=unused-import



def start(out_dir, config: QuickstartConfig, world_config) -> tuple[Stages, Path, Path]:
  """The stages every experiment shares: world, vocabulary, reference points, the BERT stage
  and the ICT warm start. Returns (stages, bert run, ict run)."""
  # Kept as given: records and configs name their folders as the user did, not by machine path.
  out = Path(out_dir)
  stages_lib.use_compile_cache(out)
  s = Stages(out, config)
  stages_lib.make_world(s, world_config)
  stages_lib.reference_points(s)
  bert = stages_lib.bert_stage(s)
  ict = stages_lib.ict_stage(s, bert)
  s.recall("ict_recall_dev", "ict", ict)
  return s, bert, ict


def _fine_tune_and_evaluate(s: Stages, experiment: str, overlays: list[str],
                            bindings: list[str]) -> None:
  tuned = s.train(f"{experiment}_finetune", ["runs/finetune.gin", *overlays], bindings)
  for split, name in (("test", "test"), ("validation", "dev")):
    s.evaluate(f"{experiment}_eval_{name}", experiment, tuned, split, overlays)


def run(*, out_dir, config: QuickstartConfig, world_config) -> list[Path]:
  """Runs every stage; returns the table files written."""
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting.render import render_tables  # pylint: disable=g-import-not-at-top
  clock = time.perf_counter()
  unknown = sorted(set(config.experiments) - set(EXPERIMENTS))
  if unknown:
    from realm_bench.errors import InputError  # pylint: disable=g-import-not-at-top
    raise InputError(f"unknown experiment(s) {unknown}; choose from {EXPERIMENTS}",
                     field="QuickstartConfig.experiments")
  s, bert, ict = start(out_dir, config, world_config)
  c = config
  if "realm" in c.experiments:
    realm = stages_lib.realm_pretrain(s, "realm_pretrain", ict, bert)
    s.recall("realm_recall_dev", "realm", realm)
    _fine_tune_and_evaluate(s, "realm", [], finetune_bindings(c, realm, bert))
  if "orqa" in c.experiments:
    _fine_tune_and_evaluate(s, "orqa", ["experiments/orqa.gin"], finetune_bindings(c, ict, bert))
  if "bm25_reader" in c.experiments:
    _fine_tune_and_evaluate(s, "bm25_reader", ["experiments/bm25_reader.gin"],
                            finetune_bindings(c, None, bert))
  if "closed_book" in c.experiments:
    _fine_tune_and_evaluate(s, "closed_book", ["experiments/closed_book.gin"],
                            finetune_bindings(c, None, bert))

  s.say("tables (synthetic-scale sections are ours only; the paper's numbers are on real data)")
  files = render_tables(runs_dir=s.runs, formats=["md"], out_dir=s.out / "tables",
                        command=f"realm-bench quickstart --out {out_dir}")
  print(summary.quickstart_summary(s.runs), flush=True)
  s.say(f"finished in {time.perf_counter() - clock:.0f} s; runs in {s.runs}")
  return files
