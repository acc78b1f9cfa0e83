"""`train`: the keyword-only entry function every training run goes through.

Gin binds it (`from realm_bench import train as train_lib`, `train_lib.train.model = ...`) and
`realm-bench train --gin_file=...` calls it. One function serves the ICT warm start, REALM
pre-training and Open-QA fine-tuning: the model and its input pipeline are what differ.

A run directory holds `config.gin` (the full config), `operative_config.gin`,
`checkpoints/`, `metrics.jsonl`, `tb/`, `index/` (retrieval runs) and, once the run has
finished, `record.json`: a run record of kind "train" whose lineage is the warm-start run's
record, so evaluations and tables can join the history (refresh interval, staleness) of every
run behind a number. Rerunning the same command resumes from the newest checkpoint at the same
data position.
"""
from __future__ import annotations

import datetime
import shutil
import time
from pathlib import Path
from typing import Mapping, Sequence

import gin
import jax

from realm_bench import (checkpoints, distributed as distributed_lib, gin_utils, host_memory,
                         optim, validate, warm_start as warm_start_lib)
from realm_bench.iteration import StopAtStep
from realm_bench.metrics_io import MetricsWriter
from realm_bench.models_base import BaseModel
from realm_bench.partitioning import Partitioner
from realm_bench.pipelines.base import Pipeline
from realm_bench.reporting.records import (RECORD_NAME, SCALES, RunRecord, git_commit,
                                           hardware_info, read_record, write_record)
from realm_bench.tasks.data import SequenceLengths
from realm_bench.trainer import Trainer, restore_hooks, restore_or_initialize, train_loop


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def finished(run_dir) -> bool:
  """Whether a training run has written its record (it does so only at its last step)."""
  path = Path(run_dir) / RECORD_NAME
  return path.exists() and read_record(path).kind == "train"


def record_id(run_dir) -> str | None:
  """The run_id of the record a run folder holds, None when it has none (e.g. a converted
  checkpoint, or a run of an older version of this project)."""
  path = Path(run_dir) / RECORD_NAME
  return read_record(path).run_id if path.exists() else None


def check_arguments(*, run_dir, num_steps, batch_size, learning_rate, experiment, scale,
                    warmup_steps, weight_decay, checkpoint_every, log_every, keep_checkpoints,
                    seed, stop_at_step) -> None:
  """Types and ranges of `train`'s scalar arguments, in the order a reader meets them, so
  BATCH_SIZE=-4 is reported as the batch size even when WARMUP_STEPS is out of range too."""
  validate.text("train", "run_dir", str(run_dir) if run_dir is not None else None)
  validate.whole("train", "num_steps", num_steps, minimum=1)
  validate.whole("train", "batch_size", batch_size, minimum=1)
  validate.number("train", "learning_rate", learning_rate, minimum=0)
  validate.text("train", "experiment", experiment)
  validate.text("train", "scale", scale, choices=SCALES)
  validate.whole("train", "warmup_steps", warmup_steps, minimum=0, maximum=num_steps)
  validate.number("train", "weight_decay", weight_decay, minimum=0)
  validate.whole("train", "checkpoint_every", checkpoint_every, minimum=1)
  validate.whole("train", "log_every", log_every, minimum=1)
  validate.whole("train", "keep_checkpoints", keep_checkpoints, minimum=1)
  validate.whole("train", "seed", seed, minimum=0)
  validate.whole("train", "stop_at_step", stop_at_step, minimum=1, optional=True)


def _first_missing(path: Path) -> Path | None:
  """The outermost folder of `path` that does not exist yet (None when `path` exists)."""
  missing = None
  for folder in (path, *path.parents):
    if folder.exists():
      break
    missing = folder
  return missing


def _abandon(created: Path | None) -> None:
  """Removes the folders a run that failed during set-up created (none, when resuming)."""
  if created is not None:
    shutil.rmtree(created, ignore_errors=True)


def train(*, model: BaseModel, pipeline: Pipeline, run_dir: str, num_steps: int,
          batch_size: int, learning_rate: float, sequence_lengths: SequenceLengths,
          experiment: str, scale: str = "synthetic", warmup_steps: int = 0,
          weight_decay: float = 0.01, checkpoint_every: int = 100, log_every: int = 10,
          keep_checkpoints: int = 2, seed: int = 0,
          warm_starts: Sequence[tuple[str | None, Mapping[str, str]]] = (),
          lr_multipliers: Mapping[str, float] | None = None,
          partitioner: Partitioner | None = None, progress: bool = True,
          stop_at_step: int | None = None,
          distributed: distributed_lib.DistributedConfig | None = None,
          process_rows: str = "prepared") -> RunRecord:
  """Trains `model` on `pipeline`'s batches; returns (and, when finished, writes) its record.

  `warm_starts` lists (run folder, {subtree of this model: subtree of that run's}) pairs,
  applied in order to the fresh parameters of step 0 (a None folder is skipped): REALM's
  pre-training takes its retriever from the ICT run and its reader and MLM head from the BERT
  stage. The first run listed is the record's lineage. `lr_multipliers` gives top-level
  subtrees a learning rate of their own (`optim.make_optimizer`). `stop_at_step` ends this
  process early (after checkpointing), as a preemption would: the schedule still runs to
  `num_steps`, and rerunning the command resumes.

  `distributed` (default: `DistributedConfig()` with its gin bindings, else the variables
  `launch_local` sets) makes this one process of a multi-process run: it joins before any JAX
  computation, feeds its rows of every global batch, and only process 0 writes config.gin, the
  record and metrics; orbax writes each checkpoint once. `process_rows` says where the batch is
  split: "prepared" (default) has every process prepare the whole global batch and keep its
  rows of the model batch, so the run equals a one-process run whatever the pipeline's
  `prepare` draws per batch (ICT's and MLM's masks are drawn for the batch, not per row), at
  the cost of repeating the host work on every process; "examples" splits the raw examples
  first (`distributed.shard_batches`), so each process prepares only its rows: no repeated
  work, but the batches then depend on the process count unless `prepare` is row-wise.
  """
  validate.text("train", "process_rows", process_rows, choices=("prepared", "examples"))
  distributed_lib.initialize(config=distributed)
  primary = distributed_lib.is_primary()
  check_arguments(run_dir=run_dir, num_steps=num_steps, batch_size=batch_size,
                  learning_rate=learning_rate, experiment=experiment, scale=scale,
                  warmup_steps=warmup_steps, weight_decay=weight_decay,
                  checkpoint_every=checkpoint_every, log_every=log_every,
                  keep_checkpoints=keep_checkpoints, seed=seed, stop_at_step=stop_at_step)
  run_dir = Path(run_dir)
  created = _first_missing(run_dir)
  run_dir.mkdir(parents=True, exist_ok=True)
  started, clock = _now(), time.perf_counter()

  # Set-up: warm starts, the pipeline, the first batch, the restored or fresh state. Only once
  # it has succeeded does the folder get its config.gin; a new folder that failed here is
  # removed, so a typo never leaves a run folder that looks like a started run.
  sources = [(Path(run), dict(subtrees)) for run, subtrees in warm_starts if run]
  manager = None
  try:
    loaded = [(run, checkpoints.load_params(run / "checkpoints"), subtrees)
              for run, subtrees in sources]
    warm_params = None
    if loaded:   # what the pipeline builds a frozen index from: the retriever's source
      warm_params = next((p for _, p, m in loaded if "retriever" in m), loaded[0][1])
    pipeline.setup(model=model, run_dir=run_dir, sequence_lengths=sequence_lengths,
                   warm_start_params=warm_params)
  except BaseException:
    _abandon(created)
    raise
  try:   # the pipeline may have started an index builder: stop it however this ends
    try:
      batches = pipeline.stream(batch_size=batch_size, seed=seed)
      shard = distributed_lib.DataShard.of_this_process()
      prepare, shape_batch = pipeline.prepare, pipeline.shape_batch
      if shard.num_shards > 1 and process_rows == "examples":
        batches = distributed_lib.shard_batches(batches, shard)
      elif shard.num_shards > 1:
        def prepare(step, params, raw):   # pylint: disable=function-redefined
          return shard.local_batch(pipeline.prepare(step, params, raw))

        def shape_batch(raw):   # pylint: disable=function-redefined
          return shard.local_batch(pipeline.shape_batch(raw))
      optimizer = optim.make_optimizer(learning_rate=learning_rate, warmup_steps=warmup_steps,
                                       total_steps=num_steps, weight_decay=weight_decay,
                                       lr_multipliers=lr_multipliers)
      trainer = Trainer(model, optimizer, partitioner, dropout_seed=seed)
      manager = checkpoints.CheckpointManager(run_dir / "checkpoints", keep=keep_checkpoints)
      hooks = pipeline.hooks() + ([] if stop_at_step is None else [StopAtStep(stop_at_step)])
      rng = jax.random.PRNGKey(seed)
      init_batch = shape_batch(batches.peek())
      host_memory.check_step_fits(trainer=trainer, rng=rng, batch=init_batch)
      state, start_step, extra = restore_or_initialize(
          trainer=trainer, checkpoint_manager=manager, batches=batches, rng=rng,
          init_batch=init_batch)
      if start_step == 0 and loaded:
        started_params = jax.device_get(state.params)
        for run, params, subtrees in loaded:
          started_params = warm_start_lib.warm_start(started_params, params, subtrees, where=str(run))
        state = state.replace(params=jax.tree.map(
            lambda new, old: jax.device_put(new, old.sharding), started_params, state.params))
      if start_step > 0:
        restore_hooks(hooks, extra, state.params, start_step)
    except BaseException:
      if manager is not None:
        manager.close()
      pipeline.close()
      _abandon(created)
      raise
    if primary:
      gin_utils.write_config(run_dir)

    writer = MetricsWriter(run_dir)
    try:
      result = train_loop(
          trainer=trainer, state=state, batches=batches, start_step=start_step,
          num_steps=num_steps, checkpoint_manager=manager, checkpoint_every=checkpoint_every,
          log_every=log_every, metrics_writer=writer, prepare=prepare, hooks=hooks,
          progress=progress)
    finally:
      writer.close()
      manager.close()
  finally:
    pipeline.close()

  summary = pipeline.summary()
  record = RunRecord(
      run_id=run_dir.name, kind="train", experiment=experiment,
      lineage=record_id(sources[0][0]) if sources else None,
      task=pipeline.task_name, dataset=pipeline.dataset, split="train", scale=scale,
      metrics=result.metrics, num_examples=pipeline.num_examples,
      gin_config=gin.config_str(), git_commit=git_commit(), hardware=hardware_info(),
      start_time=started, end_time=_now(), steps=result.step,
      index_manifests=summary.get("index_manifests", []), params=summary.get("params", {}),
      stats={**summary.get("stats", {}), "resumed_from_step": start_step,
             "seconds_this_process": round(time.perf_counter() - clock, 2),
             "warm_starts": [record_id(run) or str(run) for run, _ in sources]})
  if not primary:
    return record
  operative = gin_utils.write_operative_config(run_dir)
  summaries = MetricsWriter(run_dir)
  try:
    summaries.write_summary(result.step, texts={
        "operative_config": "    " + operative.read_text(encoding="utf-8").replace("\n", "\n    ")})
  finally:
    summaries.close()
  if result.step == num_steps:  # the record marks a finished run; evaluations read it
    write_record(run_dir, record)
  return record
