"""The quickstart: REALM end to end on the synthetic world, on a laptop's CPU.

  world -> vocabulary -> ICT warm start -> REALM pre-training (index refreshed as it trains)
        -> zero-shot Recall@5 -> Open-QA fine-tuning -> exact match on the NQ twin's test split
        -> the same fine-tuning with retrieval switched off (closed-book control)
        -> ORQA (fine-tuned straight from the ICT retriever, no REALM pre-training)
        -> the synthetic-scale section of the tables.

Every stage is one gin-configured call of an entry function (`train`, `evaluate`,
`evaluate_retrieval`) with the same gin files a user would pass on the command line, so the
quickstart is also a worked example of the run layering. Each stage skips itself when its
output exists, so an interrupted quickstart picks up where it stopped.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import gin

from realm_bench import gin_utils


@gin.configurable
@dataclasses.dataclass
class QuickstartConfig:
  """Stage sizes chosen so the whole pipeline fits in about 10 minutes on 2 CPU cores."""
  world_gin: str = "world/default.gin"
  size_gin: str = "sizes/tiny.gin"
  vocab_size: int = 2000
  seed: int = 0
  ict_steps: int = 300
  ict_batch: int = 64
  ict_lr: float = 5e-4
  pretrain_steps: int = 200
  pretrain_batch: int = 16
  pretrain_lr: float = 3e-4
  refresh_every: int = 20
  num_candidates: int = 4      # the null document and the top 3 (paper: 8)
  finetune_steps: int = 300
  finetune_batch: int = 12
  finetune_lr: float = 1e-4
  num_retrieved: int = 32
  num_read: int = 5
  # "orqa" (fine-tuning straight from the ICT retriever) is left out of the default budget.
  experiments: tuple[str, ...] = ("realm", "closed_book")


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

  def train(self, name, run_file, bindings) -> Path:
    from realm_bench import train as train_lib  # pylint: disable=g-import-not-at-top
    run_dir = self.runs / name
    if train_lib.finished(run_dir):
      _say(f"{name}: done already ({run_dir})")
      return run_dir
    _say(f"{name}: training ({run_file})")
    self.call(train_lib.train, [run_file], [f"RUN_DIR = '{run_dir}'"] + bindings)
    return run_dir

  def evaluate(self, name, experiment, finetuned, split, extra=()) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
    run_dir = self.runs / name
    if (run_dir / "record.json").exists():
      return read_record(run_dir / "record.json").metrics
    metrics = self.call(eval_lib.evaluate, ["runs/evaluate.gin"], [
        f"RUN_DIR = '{run_dir}'", f"CHECKPOINT_FROM = '{finetuned}'",
        f"EXPERIMENT = '{experiment}'", "DATASET = 'nq'", f"SPLIT = '{split}'",
        f"NUM_RETRIEVED = {self.config.num_retrieved}", f"NUM_READ = {self.config.num_read}",
        *extra])
    _say(f"{name}: exact match {metrics['exact_match']:.1f}")
    return metrics

  def recall(self, name, experiment, checkpoint) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
    run_dir = self.runs / name
    if (run_dir / "record.json").exists():
      return read_record(run_dir / "record.json").metrics
    metrics = self.call(eval_lib.evaluate_retrieval, ["runs/evaluate_retrieval.gin"], [
        f"RUN_DIR = '{run_dir}'", f"CHECKPOINT_FROM = '{checkpoint}'",
        f"EXPERIMENT = '{experiment}'", "DATASET = 'nq'"])
    _say(f"{name}: zero-shot recall@5 {metrics['recall@5']:.1f}")
    return metrics


def start(out_dir, config: QuickstartConfig) -> tuple[_Stages, Path]:
  """The stages every experiment shares: world, vocabulary and the ICT warm start."""
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
    _say(f"generating the synthetic world ({c.world_gin})")
    gin_utils.parse_gin([c.world_gin], [])
    world_lib.generate(out_dir=s.world, config=world_lib.WorldConfig())
  if not s.vocab.exists():
    _say("learning a WordPiece vocabulary from the world")
    vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_world(s.world), size=c.vocab_size,
                               out=s.vocab)
  ict = s.train("ict", "runs/ict.gin", [
      f"NUM_STEPS = {c.ict_steps}", f"BATCH_SIZE = {c.ict_batch}",
      f"LEARNING_RATE = {c.ict_lr}", f"WARMUP_STEPS = {c.ict_steps // 10}"])
  return s, ict


def pretrain_bindings(c: QuickstartConfig, warm_start: Path) -> list[str]:
  return [f"WARM_START = '{warm_start}'", f"NUM_STEPS = {c.pretrain_steps}",
          f"BATCH_SIZE = {c.pretrain_batch}", f"LEARNING_RATE = {c.pretrain_lr}",
          f"WARMUP_STEPS = {c.pretrain_steps // 10}", f"REFRESH_EVERY = {c.refresh_every}",
          f"NUM_CANDIDATES = {c.num_candidates}"]


def finetune_bindings(c: QuickstartConfig, warm_start: Path) -> list[str]:
  return [f"WARM_START = '{warm_start}'", f"NUM_STEPS = {c.finetune_steps}",
          f"BATCH_SIZE = {c.finetune_batch}", f"LEARNING_RATE = {c.finetune_lr}",
          f"WARMUP_STEPS = {c.finetune_steps // 10}", f"NUM_RETRIEVED = {c.num_retrieved}",
          f"NUM_READ = {c.num_read}"]


def run(*, out_dir, config: QuickstartConfig) -> list[Path]:
  """Runs every stage; returns the table files written."""
  from realm_bench.reporting.render import render_tables  # pylint: disable=g-import-not-at-top
  clock = time.perf_counter()
  s, ict = start(out_dir, config)
  c = config

  if "realm" in c.experiments:
    realm = s.train("realm_pretrain", "runs/pretrain.gin", pretrain_bindings(c, ict))
    s.recall("realm_recall_dev", "realm", realm)
    tuned = s.train("realm_finetune", "runs/finetune.gin",
                    finetune_bindings(c, realm) + ["EXPERIMENT = 'realm'"])
    s.evaluate("realm_eval_test", "realm", tuned, "test")
    s.evaluate("realm_eval_dev", "realm", tuned, "validation")
  if "closed_book" in c.experiments:
    warm = s.runs / "realm_pretrain" if "realm" in c.experiments else ict
    tuned = s.train("closed_book_finetune", "runs/finetune.gin",
                    finetune_bindings(c, warm) + ["RETRIEVE = False",
                                                  "EXPERIMENT = 'closed_book'"])
    s.evaluate("closed_book_eval_test", "closed_book", tuned, "test", ["RETRIEVE = False"])
  if "orqa" in c.experiments:
    s.recall("orqa_recall_dev", "orqa", ict)
    tuned = s.train("orqa_finetune", "runs/finetune.gin",
                    finetune_bindings(c, ict) + ["EXPERIMENT = 'orqa'"])
    s.evaluate("orqa_eval_test", "orqa", tuned, "test")
    s.evaluate("orqa_eval_dev", "orqa", tuned, "validation")

  _say("tables (synthetic-scale sections are ours only; the paper's numbers are on real data)")
  files = render_tables(runs_dir=s.runs, formats=["md"], out_dir=s.out / "tables",
                        command=f"realm-bench quickstart --out {out_dir}", echo=True)
  _say(f"finished in {time.perf_counter() - clock:.0f} s; runs in {s.runs}")
  return files
