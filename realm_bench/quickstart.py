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

import dataclasses
import time
from pathlib import Path

import gin

from realm_bench import gin_utils

EXPERIMENTS = ("realm", "orqa", "bm25_reader", "closed_book")


@gin.configurable
@dataclasses.dataclass
class QuickstartConfig:
  """Stage sizes chosen so the whole pipeline fits in about 10 minutes on 2 CPU cores."""
  world_gin: str = "world/default.gin"
  size_gin: str = "sizes/tiny.gin"
  vocab_size: int = 2000
  seed: int = 0
  bert_steps: int = 600
  bert_batch: int = 128
  bert_lr: float = 1e-4
  ict_steps: int = 1000
  ict_batch: int = 64
  ict_lr: float = 5e-4
  pretrain_steps: int = 300
  pretrain_batch: int = 16
  pretrain_lr: float = 1e-4
  retriever_lr_scale: float = 0.1
  score_scale: float = 0.0884   # 1/sqrt(128); the paper's is 1.0
  refresh_every: int = 20
  num_candidates: int = 8      # the null document and the top 7, as in the paper
  finetune_steps: int = 300
  finetune_batch: int = 12
  finetune_lr: float = 1e-4
  num_retrieved: int = 32
  num_read: int = 5
  experiments: tuple[str, ...] = EXPERIMENTS


def _say(message: str) -> None:
  print(f"[quickstart {time.strftime('%H:%M:%S')}] {message}", flush=True)


class _Stages:
  def __init__(self, out: Path, config: QuickstartConfig):
    self.out = out
    self.config = config
    self.world = out / "world"
    self.vocab = out / "vocab.txt"
    self.runs = out / "runs"

  def data_bindings(self) -> list[str]:
    return [f"WORLD_DIR = '{self.world}'", f"VOCAB_PATH = '{self.vocab}'",
            f"SEED = {self.config.seed}"]

  def call(self, fn, gin_files, bindings):
    gin_utils.parse_gin(list(gin_files) + [self.config.size_gin],
                        self.data_bindings() + list(bindings))
    return gin.get_configurable(fn)()

  def train(self, name, gin_files, bindings) -> Path:
    from realm_bench import train as train_lib  # pylint: disable=g-import-not-at-top
    run_dir = self.runs / name
    if train_lib.finished(run_dir):
      _say(f"{name}: done already ({run_dir})")
      return run_dir
    _say(f"{name}: training ({', '.join(gin_files)})")
    self.call(train_lib.train, gin_files, [f"RUN_DIR = '{run_dir}'"] + bindings)
    return run_dir

  def _done(self, name):
    from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
    path = self.runs / name / "record.json"
    return read_record(path).metrics if path.exists() else None

  def evaluate(self, name, experiment, finetuned, split, overlays=()) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    metrics = self._done(name)
    if metrics is None:
      metrics = self.call(eval_lib.evaluate, ["runs/evaluate.gin", *overlays], [
          f"RUN_DIR = '{self.runs / name}'", f"CHECKPOINT_FROM = '{finetuned}'",
          f"EXPERIMENT = '{experiment}'", "DATASET = 'nq'", f"SPLIT = '{split}'",
          f"NUM_RETRIEVED = {self.config.num_retrieved}", f"NUM_READ = {self.config.num_read}",
          f"SCORE_SCALE = {self.config.score_scale}", "BERT_RUN = None"])
      _say(f"{name}: exact match {metrics['exact_match']:.1f}")
    return metrics

  def recall(self, name, experiment, checkpoint) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    metrics = self._done(name)
    if metrics is None:
      metrics = self.call(eval_lib.evaluate_retrieval, ["runs/evaluate_retrieval.gin"], [
          f"RUN_DIR = '{self.runs / name}'", f"CHECKPOINT_FROM = '{checkpoint}'",
          f"EXPERIMENT = '{experiment}'", "DATASET = 'nq'"])
      _say(f"{name}: zero-shot recall@5 {metrics['recall@5']:.1f}")
    return metrics


def start(out_dir, config: QuickstartConfig, world_config) -> tuple[_Stages, Path, Path]:
  """The stages every experiment shares: world, vocabulary, reference points, the BERT stage
  and the ICT warm start. Returns (stages, bert run, ict run)."""
  from realm_bench import baselines  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  # Kept as given: records and configs name their folders as the user did, not by machine path.
  out = Path(out_dir)
  # Stages with the same shapes (the fine-tunings, the evaluations) reuse compiled programs.
  jax.config.update("jax_compilation_cache_dir", str(out / "jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  s = _Stages(out, config)
  c = config
  if not (s.world / "manifest.json").exists():
    _say(f"generating the synthetic world ({c.world_gin}, seed {world_config.seed})")
    world_lib.generate(out_dir=s.world, config=world_config)
  if not s.vocab.exists():
    _say("learning a WordPiece vocabulary from the world")
    vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_world(s.world), size=c.vocab_size,
                               out=s.vocab)
  for split in ("test", "dev"):
    if not (s.runs / f"answer_prior_nq_{split}" / "record.json").exists():
      points = baselines.reference_points(world_dir=s.world, runs_dir=s.runs, split=split)
      _say(f"reference points, NQ {split}: " + ", ".join(
          f"{name} {value:.1f}" for metrics in points.values()
          for name, value in [next(iter(metrics.items()))]))
  bert = s.train("bert", ["runs/bert.gin"], [
      f"NUM_STEPS = {c.bert_steps}", f"BATCH_SIZE = {c.bert_batch}",
      f"LEARNING_RATE = {c.bert_lr}", f"WARMUP_STEPS = {c.bert_steps // 10}"])
  ict = s.train("ict", ["runs/ict.gin"], [
      f"BERT_RUN = '{bert}'", f"NUM_STEPS = {c.ict_steps}", f"BATCH_SIZE = {c.ict_batch}",
      f"LEARNING_RATE = {c.ict_lr}", f"WARMUP_STEPS = {c.ict_steps // 10}"])
  s.recall("ict_recall_dev", "ict", ict)
  return s, bert, ict


def pretrain_bindings(c: QuickstartConfig, ict: Path, bert: Path) -> list[str]:
  return [f"WARM_START = '{ict}'", f"BERT_RUN = '{bert}'", f"NUM_STEPS = {c.pretrain_steps}",
          f"BATCH_SIZE = {c.pretrain_batch}", f"LEARNING_RATE = {c.pretrain_lr}",
          f"WARMUP_STEPS = {c.pretrain_steps // 10}", f"REFRESH_EVERY = {c.refresh_every}",
          f"NUM_CANDIDATES = {c.num_candidates}", f"RETRIEVER_LR_SCALE = {c.retriever_lr_scale}",
          f"SCORE_SCALE = {c.score_scale}"]


def finetune_bindings(c: QuickstartConfig, warm_start: Path | None, bert: Path) -> list[str]:
  return [f"WARM_START = {str(warm_start)!r}" if warm_start else "WARM_START = None",
          f"BERT_RUN = '{bert}'", f"NUM_STEPS = {c.finetune_steps}",
          f"BATCH_SIZE = {c.finetune_batch}", f"LEARNING_RATE = {c.finetune_lr}",
          f"WARMUP_STEPS = {c.finetune_steps // 10}", f"NUM_RETRIEVED = {c.num_retrieved}",
          f"NUM_READ = {c.num_read}", f"SCORE_SCALE = {c.score_scale}"]


def _fine_tune_and_evaluate(s: _Stages, experiment: str, overlays: list[str],
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
    realm = s.train("realm_pretrain", ["runs/pretrain.gin"], pretrain_bindings(c, ict, bert))
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

  _say("tables (synthetic-scale sections are ours only; the paper's numbers are on real data)")
  files = render_tables(runs_dir=s.runs, formats=["md"], out_dir=s.out / "tables",
                        command=f"realm-bench quickstart --out {out_dir}")
  print(summary.quickstart_summary(s.runs), flush=True)
  _say(f"finished in {time.perf_counter() - clock:.0f} s; runs in {s.runs}")
  return files
