"""The stage runner the quickstart, the sweep and `reproduce` share.

A stage is one gin-configured call of an entry function (`train`, `evaluate`,
`evaluate_retrieval`) with the same run files a user would pass on the command line, into its
own folder under `runs/`. A stage whose record exists is skipped, and an interrupted training
resumes from its checkpoint, so every driver built from these stages is resumable for free.
All of them run in one process with one persistent compile cache, so stages of the same
shapes (the fine-tunings, the evaluations) compile once. Each stage's record carries the
standalone `realm-bench train|evaluate|recall` command equivalent to its call
(`stage_command`), so a row of the leaderboard names how to rerun exactly that stage.

`QuickstartConfig` (named for the command that first used it; gin files bind it as
`quickstart.QuickstartConfig`) holds the step counts, batch sizes and learning rates of the
synthetic-scale recipe; the bindings helpers turn them into the run files' macros.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Collection, Sequence

import gin

from realm_bench import gin_utils
from realm_bench.reporting.records import recording_command

# Synthetic twins of the three Open-QA benchmarks: dataset id -> the overlay that points
# QA_TASK at its task (gin/datasets/), as the records' `dataset` field names them.
DATASET_GIN = {"nq": "datasets/nq.gin", "wq": "datasets/wq.gin", "ct": "datasets/ct.gin"}


# The quickstart's systems (each a fine-tuning overlay and its evaluations).
EXPERIMENTS = ("realm", "orqa", "bm25_reader", "closed_book")


@gin.configurable(module="realm_bench.quickstart")
@dataclasses.dataclass
class QuickstartConfig:
  """Stage sizes of the quickstart on 2 CPU cores: 18.5 minutes measured on world/default.gin,
  24.7 on the reworded world in a session whose stages all ran ~1.6x slower; over the 10
  minutes it was sized for, since fine-tuning runs to 900 steps (README, "Measured")."""
  world_gin: str = "world/reworded.gin"
  size_gin: str = "sizes/tiny.gin"
  # Overlays parsed after size_gin for every stage (e.g. testing/tiny.gin for a smoke run).
  extra_gin: tuple[str, ...] = ()
  vocab_size: int = 2000
  seed: int = 0
  bert_steps: int = 600
  bert_batch: int = 128
  bert_lr: float = 1e-4
  ict_steps: int = 1000
  ict_batch: int = 64
  ict_lr: float = 5e-4
  # ICT's warm-up, a fraction of its steps. Every ICT run starts from one embedding for all
  # inputs (nothing trains the BERT stage's pooled [CLS]); at the full rate by step 100 (0.1)
  # the runs from some BERT stages settle in a solution that does not find the questions'
  # subjects, at 0.3 they do not (results/EXPERIMENTS.md E66-E69).
  ict_warmup_fraction: float = 0.3
  # Blocks of each ICT query's own article among its in-batch negatives
  # (`ict.IctPipeline.siblings_per_block`); 0: ORQA's batches (results/EXPERIMENTS.md E86).
  ict_siblings_per_block: int = 0
  # > 0: REALM pre-training in two phases (results/EXPERIMENTS.md E58), the retriever alone
  # first, under the BERT stage's reader held fixed (READER_LR_SCALE = 0) at its own rate,
  # then `pretrain_steps` of the paper's joint training from there. 0 (the default): the
  # paper's single joint phase; the two-phase recipe did not hold up across worlds (E58).
  retriever_warmup_steps: int = 0
  retriever_warmup_lr_scale: float = 1.0
  pretrain_steps: int = 300
  pretrain_batch: int = 16
  pretrain_lr: float = 1e-4
  retriever_lr_scale: float = 0.1
  score_scale: float = 0.0884   # 1/sqrt(128); the paper's is 1.0
  refresh_every: int = 20
  num_candidates: int = 8      # the null document and the top 7, as in the paper
  # 900 steps of 12 are 3.9 epochs of the NQ twin's 2,752 training questions. At 300 (1.3
  # epochs) every reader's loss was still falling fast, and what REALM pre-training gives
  # its encoder went unused: REALM - ORQA +2.6 EM at 300, +9.7 at 900 on the alias world's
  # world 1 (results/EXPERIMENTS.md E79, which also shows that gain is not retrieval's).
  finetune_steps: int = 900
  finetune_batch: int = 12
  finetune_lr: float = 1e-4
  num_retrieved: int = 32
  num_read: int = 5
  experiments: tuple[str, ...] = EXPERIMENTS


# The `realm-bench` command that runs each entry function a stage calls.
CLI_COMMANDS = {"train": "train", "evaluate": "evaluate", "evaluate_retrieval": "recall"}


def stage_command(fn, gin_files: Sequence[str], bindings: Sequence[str],
                  read: Collection[str]) -> list[str]:
  """The command-line arguments that run the stage `fn(gin_files, bindings)` standalone.

  The command line is strict where a stage's parse is not: it refuses a macro that nothing
  reads, and the stages set some for every kind of run (SEED, WORLD_DIR, ...). Those bind
  nothing, so they are left out (`read`: the macros the stage's config reads) and the
  command still does what the stage did."""
  kept = [b for b in bindings if (m := gin_utils.macro_of(b)) is None or m in read]
  flags = []
  for binding in kept:
    key, _, value = binding.partition("=")
    flags.append(f"{gin_utils.GIN_FLAG}{key.strip()}={value.strip()}")
  if any("\n" in b or not gin_utils.is_flag_key(b.partition("=")[0].strip()) for b in kept):
    # Not expressible as --gin.KEY=VALUE: all as --gin_bindings, which keeps their order.
    flags = [f"--gin_bindings={b}" for b in kept]
  return [CLI_COMMANDS[fn.__name__], *(f"--gin_file={f}" for f in gin_files), *flags]


class Stages:
  """Runs stages into `out/runs/NAME`, skipping those already finished.

  `world`, `vocab` and `tokens` (the corpus's token files, which every stage shares instead
  of tokenising the corpus into its own run folder) default to `out/world`, `out/vocab.txt`
  and `out/corpus_tokens`; drivers that run several seeds on one world pass the shared ones.
  `on_stage(name, kind, seconds, skipped)` is told after each stage (the progress line of
  `reproduce`)."""

  def __init__(self, out: Path, config: QuickstartConfig, *, world: Path | None = None,
               vocab: Path | None = None, tokens: Path | None = None,
               label: str = "quickstart", on_stage=None):
    self.out = Path(out)
    self.config = config
    self.world = self.out / "world" if world is None else Path(world)
    self.vocab = self.out / "vocab.txt" if vocab is None else Path(vocab)
    self.tokens = self.out / "corpus_tokens" if tokens is None else Path(tokens)
    self.runs = self.out / "runs"
    self.label = label
    self.on_stage = on_stage

  def say(self, message: str) -> None:
    print(f"[{self.label} {time.strftime('%H:%M:%S')}] {message}", flush=True)

  def data_bindings(self) -> list[str]:
    return [f"WORLD_DIR = '{self.world}'", f"VOCAB_PATH = '{self.vocab}'",
            f"CORPUS_TOKENS_DIR = '{self.tokens}'", f"SEED = {self.config.seed}"]

  def call(self, fn, gin_files, bindings):
    files = [*gin_files, self.config.size_gin, *self.config.extra_gin]
    bindings = [*self.data_bindings(), *bindings]
    parsed = gin_utils.parse_gin(files, bindings)
    with recording_command(stage_command(fn, files, bindings, parsed.read)):
      return gin.get_configurable(fn)()

  def _told(self, name, kind, started, skipped):
    if self.on_stage is not None:
      self.on_stage(name, kind, time.perf_counter() - started, skipped)

  def train(self, name, gin_files, bindings, *, kind: str = "train") -> Path:
    from realm_bench import train as train_lib  # pylint: disable=g-import-not-at-top
    started = time.perf_counter()
    run_dir = self.runs / name
    if train_lib.finished(run_dir):
      self.say(f"{name}: done already ({run_dir})")
      self._told(name, kind, started, True)
      return run_dir
    self.say(f"{name}: training ({', '.join(gin_files)})")
    self.call(train_lib.train, gin_files, [f"RUN_DIR = '{run_dir}'"] + list(bindings))
    self._told(name, kind, started, False)
    return run_dir

  def finished(self, name) -> bool:
    """Whether stage `name` has written its record (a training writes it at its last step)."""
    return (self.runs / name / "record.json").exists()

  def done_metrics(self, name):
    from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top
    path = self.runs / name / "record.json"
    return read_record(path).metrics if path.exists() else None

  def evaluate(self, name, experiment, finetuned, split, overlays=(), *,
               dataset: str = "nq", bindings: Sequence[str] = ()) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    started = time.perf_counter()
    metrics = self.done_metrics(name)
    skipped = metrics is not None
    if not skipped:
      metrics = self.call(eval_lib.evaluate, ["runs/evaluate.gin", DATASET_GIN[dataset],
                                              *overlays], [
          f"RUN_DIR = '{self.runs / name}'", f"CHECKPOINT_FROM = '{finetuned}'",
          f"EXPERIMENT = '{experiment}'", f"DATASET = '{dataset}'", f"SPLIT = '{split}'",
          f"NUM_RETRIEVED = {self.config.num_retrieved}", f"NUM_READ = {self.config.num_read}",
          f"SCORE_SCALE = {self.config.score_scale}", "BERT_RUN = None", *bindings])
      self.say(f"{name}: exact match {metrics['exact_match']:.1f}")
    self._told(name, "evaluate", started, skipped)
    return metrics

  def recall(self, name, experiment, checkpoint) -> dict:
    from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
    started = time.perf_counter()
    metrics = self.done_metrics(name)
    skipped = metrics is not None
    if not skipped:
      metrics = self.call(eval_lib.evaluate_retrieval, ["runs/evaluate_retrieval.gin"], [
          f"RUN_DIR = '{self.runs / name}'", f"CHECKPOINT_FROM = '{checkpoint}'",
          f"EXPERIMENT = '{experiment}'", "DATASET = 'nq'"])
      # Zero-shot only when the checkpoint is a pre-training's; a fine-tuning's is its own.
      self.say(f"{name}: recall@5 {metrics['recall@5']:.1f} ({checkpoint.name}'s retriever)")
    self._told(name, "recall", started, skipped)
    return metrics


def use_compile_cache(out: Path) -> None:
  """Stages with the same shapes (the fine-tunings, the evaluations) reuse compiled programs."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_compilation_cache_dir", str(Path(out) / "jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


def make_world(s: Stages, world_config) -> None:
  """The synthetic world and its WordPiece vocabulary, unless they exist. A world folder made
  with another world config is refused, not silently reused."""
  import json  # pylint: disable=g-import-not-at-top
  from realm_bench.errors import InputError  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  manifest = s.world / "manifest.json"
  if manifest.exists():
    wanted = json.loads(json.dumps(dataclasses.asdict(world_config)))
    # A field a folder's manifest predates had the value of the world before the field.
    made = {**json.loads(json.dumps(dataclasses.asdict(world_lib.WorldConfig()))),
            **world_lib.BEFORE_FIELD,
            **json.loads(manifest.read_text(encoding="utf-8")).get("config", {})}
    differ = [k for k in wanted if made.get(k) != wanted[k]]
    if differ:
      k = differ[0]
      raise InputError(f"this folder's world was made with {k} = {made.get(k)!r}, not "
                       f"{wanted[k]!r}; use another --out", path=s.world,
                       field=f"WorldConfig.{k}")
  else:
    # The fields other gin files or flags changed, so the line names the world that was made.
    changed = ", ".join(f"{f.name}={getattr(world_config, f.name)!r}"
                        for f in dataclasses.fields(world_config) if f.name != "seed"
                        and getattr(world_config, f.name) != _field_default(f))
    s.say(f"generating the synthetic world ({s.config.world_gin}, seed {world_config.seed}"
          f"{'; ' + changed if changed else ''})")
    world_lib.generate(out_dir=s.world, config=world_config)
  if not s.vocab.exists():
    s.say("learning a WordPiece vocabulary from the world")
    vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_world(s.world),
                               size=s.config.vocab_size, out=s.vocab)


def _field_default(field):
  """The class's own default: WorldConfig() would apply the gin bindings being reported."""
  if field.default_factory is not dataclasses.MISSING:
    return field.default_factory()
  return field.default


def reference_points(s: Stages) -> None:
  """The answer prior, random, BM25 and oracle retrieval on the NQ twin's test and dev splits."""
  from realm_bench import baselines  # pylint: disable=g-import-not-at-top
  for split in ("test", "dev"):
    if not s.finished(f"answer_prior_nq_{split}"):
      points = baselines.reference_points(world_dir=s.world, runs_dir=s.runs, split=split)
      s.say(f"reference points, NQ {split}: " + ", ".join(
          f"{point.replace('_', ' ')} {name} {value:.1f}" for point, metrics in points.items()
          for name, value in [next(iter(metrics.items()))]))


def bert_stage(s: Stages, *, name: str = "bert", extra: Sequence[str] = ()) -> Path:
  c = s.config
  return s.train(name, ["runs/bert.gin"], [
      f"NUM_STEPS = {c.bert_steps}", f"BATCH_SIZE = {c.bert_batch}",
      f"LEARNING_RATE = {c.bert_lr}", f"WARMUP_STEPS = {c.bert_steps // 10}", *extra],
      kind="bert")


def ict_stage(s: Stages, bert: Path, *, name: str = "ict", extra: Sequence[str] = ()) -> Path:
  c = s.config
  if not 0.0 <= c.ict_warmup_fraction <= 1.0:
    from realm_bench.errors import InputError  # pylint: disable=g-import-not-at-top
    raise InputError(f"must be in [0, 1], got {c.ict_warmup_fraction!r}",
                     field="QuickstartConfig.ict_warmup_fraction")
  return s.train(name, ["runs/ict.gin"], [
      f"BERT_RUN = '{bert}'", f"NUM_STEPS = {c.ict_steps}", f"BATCH_SIZE = {c.ict_batch}",
      f"LEARNING_RATE = {c.ict_lr}",
      f"WARMUP_STEPS = {round(c.ict_steps * c.ict_warmup_fraction)}",
      *([f"ict.IctPipeline.siblings_per_block = {c.ict_siblings_per_block}"]
        if c.ict_siblings_per_block else []), *extra],
      kind="ict")


def pretrain_bindings(c: QuickstartConfig, ict: Path, bert: Path, *,
                      steps: int | None = None) -> list[str]:
  steps = c.pretrain_steps if steps is None else steps
  return [f"WARM_START = '{ict}'", f"BERT_RUN = '{bert}'", f"NUM_STEPS = {steps}",
          f"BATCH_SIZE = {c.pretrain_batch}", f"LEARNING_RATE = {c.pretrain_lr}",
          f"WARMUP_STEPS = {steps // 10}",
          f"REFRESH_EVERY = {c.refresh_every}",
          f"NUM_CANDIDATES = {c.num_candidates}", f"RETRIEVER_LR_SCALE = {c.retriever_lr_scale}",
          f"SCORE_SCALE = {c.score_scale}"]


def realm_pretrain(s: Stages, name: str, ict: Path, bert: Path, *,
                   overlays: Sequence[str] = (), extra: Sequence[str] = ()) -> Path:
  """REALM pre-training `name` from the ICT and BERT runs; with `retriever_warmup_steps`,
  after `name`_retriever_warmup (the retriever trained under BERT's fixed reader), which it
  then starts from: retriever, reader and MLM head. Both phases take `overlays` and `extra`
  (a row's masking or refresh interval holds for the whole of its pre-training)."""
  c = s.config
  files = ["runs/pretrain.gin", *overlays]
  start = reader = None
  if c.retriever_warmup_steps:
    start = reader = s.train(
        f"{name}_retriever_warmup", files,
        pretrain_bindings(c, ict, bert, steps=c.retriever_warmup_steps) + list(extra)
        + ["READER_LR_SCALE = 0.0", f"RETRIEVER_LR_SCALE = {c.retriever_warmup_lr_scale}"],
        kind="pretrain")
  return s.train(name, files, pretrain_bindings(c, start or ict, reader or bert) + list(extra),
                 kind="pretrain")


def finetune_bindings(c: QuickstartConfig, warm_start: Path | None, bert: Path,
                      extra: Sequence[str] = ()) -> list[str]:
  return [f"WARM_START = {str(warm_start)!r}" if warm_start else "WARM_START = None",
          f"BERT_RUN = '{bert}'", f"NUM_STEPS = {c.finetune_steps}",
          f"BATCH_SIZE = {c.finetune_batch}", f"LEARNING_RATE = {c.finetune_lr}",
          f"WARMUP_STEPS = {c.finetune_steps // 10}",
          f"NUM_RETRIEVED = {c.num_retrieved}",
          f"NUM_READ = {c.num_read}", f"SCORE_SCALE = {c.score_scale}", *extra]
