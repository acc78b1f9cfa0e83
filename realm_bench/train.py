"""`train`: the keyword-only entry function every training run goes through.

Gin binds it (`from realm_bench import train as train_lib`, `train_lib.train.model = ...`) and
`realm-bench train --gin_file=...` calls it. One function serves the ICT warm start, REALM
pre-training and Open-QA fine-tuning: the model and its input pipeline are what differ.

A run directory holds `config.gin` (the full config), `operative_config.gin`,
`checkpoints/`, `metrics.jsonl`, `tb/`, `index/` (retrieval runs) and `train_summary.json`.
Rerunning the same command resumes from the newest checkpoint at the same data position.
"""
from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Sequence

import jax

from realm_bench import checkpoints, gin_utils, models, optim
from realm_bench.inputs import Pipeline
from realm_bench.io_utils import atomic_write_json
from realm_bench.metrics_io import MetricsWriter
from realm_bench.models_base import BaseModel
from realm_bench.partitioning import Partitioner
from realm_bench.reporting.records import git_commit, hardware_info
from realm_bench.trainer import EXTRA_HOOKS, Trainer, restore_or_initialize, train_loop

SUMMARY = "train_summary.json"


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def train(*, model: BaseModel, pipeline: Pipeline, run_dir: str, num_steps: int,
          batch_size: int, learning_rate: float, warmup_steps: int = 0,
          weight_decay: float = 0.01, checkpoint_every: int = 100, log_every: int = 10,
          keep_checkpoints: int = 2, seed: int = 0, warm_start_from: str | None = None,
          warm_start_keys: Sequence[str] = ("retriever", "reader"),
          partitioner: Partitioner | None = None, progress: bool = True,
          stop_at_step: int | None = None) -> dict:
  """Trains `model` on `pipeline`'s batches; returns (and writes) the run's summary.

  `stop_at_step` ends this process early (after checkpointing), as a preemption would: the
  schedule still runs to `num_steps`, and rerunning the command resumes.
  """
  run_dir = Path(run_dir)
  run_dir.mkdir(parents=True, exist_ok=True)
  gin_utils.write_config(run_dir)
  started, clock = _now(), time.perf_counter()

  warm_params = None
  if warm_start_from:
    warm_params = checkpoints.load_params(Path(warm_start_from) / "checkpoints")
  pipeline.setup(model=model, run_dir=run_dir, warm_start_params=warm_params)
  try:   # the pipeline may have started an index builder: stop it however this ends
    batches = pipeline.stream(batch_size=batch_size, seed=seed)
    optimizer = optim.make_optimizer(learning_rate=learning_rate, warmup_steps=warmup_steps,
                                     total_steps=num_steps, weight_decay=weight_decay)
    trainer = Trainer(model, optimizer, partitioner, dropout_seed=seed)
    manager = checkpoints.CheckpointManager(run_dir / "checkpoints", keep=keep_checkpoints)
    rng = jax.random.PRNGKey(seed)
    state, start_step, extra = restore_or_initialize(
        trainer=trainer, checkpoint_manager=manager, batches=batches, rng=rng,
        init_batch=pipeline.shape_batch(batches.peek()))
    if start_step == 0 and warm_params is not None:
      fresh = jax.device_get(state.params)
      started_params = models.warm_start(fresh, warm_params, warm_start_keys)
      state = state.replace(params=jax.tree.map(
          lambda new, old: jax.device_put(new, old.sharding), started_params, state.params))
    if start_step > 0:
      pipeline.restore(extra.get(EXTRA_HOOKS, {}), state.params, start_step)

    writer = MetricsWriter(run_dir)
    try:
      result = train_loop(
          trainer=trainer, state=state, batches=batches, start_step=start_step,
          num_steps=num_steps, checkpoint_manager=manager, checkpoint_every=checkpoint_every,
          log_every=log_every, metrics_writer=writer,
          before_step=lambda step, st, raw: pipeline.prepare(step, st.params, raw),
          after_step=(None if stop_at_step is None else lambda step, *_: step >= stop_at_step),
          data_state_fn=pipeline.checkpoint_extra, progress=progress)
    finally:
      writer.close()
      manager.close()
  finally:
    pipeline.close()

  summary = {
      "run_dir": str(run_dir), "steps": result.step, "resumed_from_step": start_step,
      "final_metrics": result.metrics, "warm_start_from": warm_start_from,
      "seconds_this_process": round(time.perf_counter() - clock, 2),
      "start_time": started, "end_time": _now(), "git_commit": git_commit(),
      "hardware": hardware_info(), "pipeline": pipeline.summary(),
  }
  gin_utils.write_operative_config(run_dir)
  if result.step == num_steps:  # the summary marks a finished run; evaluations read it
    atomic_write_json(run_dir / SUMMARY, summary)
  return summary
