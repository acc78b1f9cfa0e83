"""The jit-compiled train step and the resumable training loop.

Exact resumption is the design constraint everything here serves: the dropout RNG of step s
is `fold_in(base_rng, s)` (nothing random is carried between steps), data come from an
iterator whose position is saved with every checkpoint, and metrics rows after the restored
step are dropped. A run killed at any moment and restarted therefore ends with the same
parameters and the same `metrics.jsonl` as one that was never interrupted.

Between steps the loop runs `StepHook`s (t5x "actions", see `iteration.py`) and the input
pipeline's `prepare`, in this order: every hook's `before_step` (REALM's index refresh, which
returns the step's staleness as host metrics), then `prepare(step, params, raw)`, which turns the
raw examples into the model batch (REALM retrieves against the index here). Hook state is saved
in every checkpoint's extra under EXTRA_HOOKS, one entry per hook name.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time
from typing import Any, Callable, Mapping, Sequence

import gin
import jax
import jax.numpy as jnp
import optax
from flax.core import meta

from realm_bench import optim
from realm_bench.checkpoints import CheckpointManager
from realm_bench.errors import InputError
from realm_bench.iteration import (DATA_STATE_FIELD, HOST_METRICS_KEY, DeterministicIterator,
                                   StepHook)
from realm_bench.metrics_io import MetricsWriter
from realm_bench.models_base import BaseModel
from realm_bench.partitioning import Partitioner
from realm_bench.train_state import TrainState

# Keys of the `extra` dict saved with every checkpoint.
EXTRA_DATA = DATA_STATE_FIELD
EXTRA_HOOKS = "hooks"
EXTRA_DROPOUT_SEED = "dropout_seed"
EXTRA_STEP = "step"

_STEP_METRICS = ("loss", "grad_norm", "learning_rate")


class TrainingDiverged(RuntimeError):
  """The loss (or gradient norm) became NaN/inf; the last good state was checkpointed."""

  def __init__(self, step: int, last_good_step: int, metrics: Mapping[str, float],
               checkpoint_dir):
    self.step = step
    self.last_good_step = last_good_step
    self.metrics = dict(metrics)
    super().__init__(
        f"training diverged at step {step}: loss={metrics.get('loss')} "
        f"grad_norm={metrics.get('grad_norm')}; the update was not applied and the last good "
        f"state (step {last_good_step}) is checkpointed in {checkpoint_dir}. Lower the learning "
        f"rate or inspect the batch of step {step}.")


@gin.configurable
class Trainer:
  """A model, an optimizer and a partitioner, joined into jit-compiled init and train steps."""

  def __init__(self, model: BaseModel, optimizer: optax.GradientTransformation,
               partitioner: Partitioner | None = None, *, dropout_seed: int = 0):
    self.model = model
    self.optimizer = optimizer
    self.partitioner = partitioner if partitioner is not None else Partitioner()
    self.dropout_seed = int(dropout_seed)
    self._base_rng = jax.random.PRNGKey(self.dropout_seed)
    self._state_shardings = None
    self._init_fn = None
    self._step_fn = None

  def _boxed_state(self, rng, batch) -> TrainState:
    return TrainState.create(self.model.init_params(rng, batch), self.optimizer)

  def abstract_state(self, rng: jax.Array, batch: Mapping[str, Any]) -> TrainState:
    """The state's shapes, dtypes and shardings without computing it (a restore target)."""
    boxed = jax.eval_shape(self._boxed_state, rng, dict(batch))
    shardings = self.partitioner.logical_shardings(boxed)
    if shardings != self._state_shardings:
      # Compiled steps are reused across runs (and resumes) unless the state's layout changed.
      self._state_shardings, self._init_fn, self._step_fn = shardings, None, None
    return self.partitioner.shard_params(boxed)

  def init_state(self, rng: jax.Array, batch: Mapping[str, Any]) -> TrainState:
    """Fresh parameters and optimizer state, created directly in their shards."""
    self.abstract_state(rng, batch)
    if self._init_fn is None:
      self._init_fn = self.partitioner.jit(
          lambda r, b: meta.unbox(self._boxed_state(r, b)),
          in_shardings=(self.partitioner.replicated(), self.partitioner.batch_sharding()),
          out_shardings=self._state_shardings,
          # Initialisation runs once: XLA's optimiser would spend seconds on its RNG graph.
          compiler_options={"xla_backend_optimization_level": 0})
    return self._init_fn(rng, self.partitioner.shard_batch(batch))

  def _train_step(self, state: TrainState, batch) -> tuple[TrainState, dict[str, jax.Array]]:
    dropout_rng = jax.random.fold_in(self._base_rng, state.step)
    (loss, model_metrics), grads = jax.value_and_grad(
        lambda p: self.model.loss_fn(p, batch, dropout_rng), has_aux=True)(state.params)
    clash = sorted(set(model_metrics) & set(_STEP_METRICS + (HOST_METRICS_KEY,)))
    if clash:
      raise ValueError(f"model metrics {clash} clash with the trainer's own metric names")
    grad_norm = optax.tree.norm(grads)
    updated = state.apply_gradients(grads)
    # A non-finite step is not applied: the state returned is then the last good one, which
    # the loop checkpoints before stopping (the input state is donated, so it is gone).
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    new_state = jax.tree.map(lambda new, old: jnp.where(finite, new, old), updated, state)
    metrics = {**model_metrics, "loss": loss, "grad_norm": grad_norm}
    learning_rate = optim.learning_rate_of(updated.opt_state)
    if learning_rate is not None:
      metrics["learning_rate"] = learning_rate
    return new_state, metrics

  def _compiled_step(self):
    if self._step_fn is None:
      self._step_fn = self.partitioner.jit(
          self._train_step,
          in_shardings=(self._state_shardings, self.partitioner.batch_sharding()),
          out_shardings=(self._state_shardings, self.partitioner.replicated()),
          donate_argnums=(0,))
    return self._step_fn

  def lower_step(self, abstract_state: TrainState, batch: Mapping[str, Any]):
    """The train step lowered for `abstract_state` (from `abstract_state()`): what XLA's
    memory and cost analyses read, with nothing allocated."""
    return self._compiled_step().lower(abstract_state, self.partitioner.shard_batch(batch))

  def train_step(self, state: TrainState,
                 batch: Mapping[str, Any]) -> tuple[TrainState, dict[str, jax.Array]]:
    """One update. `state` is donated (invalid afterwards); metrics are device scalars."""
    if self._state_shardings is None:
      raise RuntimeError("call Trainer.init_state or Trainer.abstract_state first: the step "
                         "is compiled for the state's shardings")
    return self._compiled_step()(state, self.partitioner.shard_batch(batch))


def restore_or_initialize(*, trainer: Trainer, checkpoint_manager: CheckpointManager,
                          batches: DeterministicIterator, rng: jax.Array,
                          init_batch: Mapping[str, Any]) -> tuple[TrainState, int, dict]:
  """(state, start_step, extra): the latest checkpoint with `batches` moved to its data
  position, or a fresh state at step 0 with extra {}. `init_batch` only supplies shapes.
  A damaged latest checkpoint is refused (or, when the manager falls back, an older one is
  restored: the step is the restored state's)."""
  if checkpoint_manager.latest_step() is None:
    return trainer.init_state(rng, init_batch), 0, {}
  target = trainer.abstract_state(rng, init_batch)
  state, extra = checkpoint_manager.restore(target_state=target)
  step = int(jax.device_get(state.step))
  where = checkpoint_manager.step_dir(step)
  if extra.get(EXTRA_DROPOUT_SEED) != trainer.dropout_seed:
    raise InputError(f"checkpoint was trained with dropout seed {extra.get(EXTRA_DROPOUT_SEED)}, "
                     f"this run uses {trainer.dropout_seed}", path=where, field=EXTRA_DROPOUT_SEED)
  if EXTRA_DATA not in extra:
    raise InputError("missing (not a training checkpoint)", path=where, field=EXTRA_DATA)
  batches.set_state(extra[EXTRA_DATA])
  return state, step, extra


@dataclasses.dataclass
class LoopResult:
  state: TrainState
  step: int
  metrics: dict[str, float]  # the last step's


def _format_seconds(seconds: float) -> str:
  if not math.isfinite(seconds):
    return "?"
  seconds = int(seconds)
  hours, rest = divmod(seconds, 3600)
  return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


class _Progress:
  """One status line on stderr: rewritten in place on a terminal, one line per log otherwise."""

  def __init__(self, *, enabled: bool, num_steps: int, stream=None):
    self.enabled = enabled and jax.process_index() == 0
    self.num_steps = num_steps
    self.stream = stream if stream is not None else sys.stderr
    self.tty = self.stream.isatty()
    self._width = 0

  def show(self, step: int, metrics: Mapping[str, float], steps_per_second: float) -> None:
    if not self.enabled:
      return
    eta = (self.num_steps - step) / steps_per_second if steps_per_second > 0 else math.inf
    parts = [f"step {step}/{self.num_steps}", f"loss {metrics['loss']:.4f}",
             f"{steps_per_second:.2f} steps/s", f"ETA {_format_seconds(eta)}"]
    parts += [f"{k} {metrics[k]:g}" for k in sorted(metrics) if "staleness" in k]
    line = "  ".join(parts)
    if self.tty:
      self.stream.write("\r" + line.ljust(self._width))
      self._width = len(line)
    else:
      self.stream.write(line + "\n")
    self.stream.flush()

  def close(self) -> None:
    if self.enabled and self.tty and self._width:
      self.stream.write("\n")
      self.stream.flush()


def _host_metrics(batch: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
  batch = dict(batch)
  extra = batch.pop(HOST_METRICS_KEY, None) or {}
  return batch, {k: float(v) for k, v in extra.items()}


def _merge_host_metrics(into: dict[str, float], more: Mapping[str, Any], where: str) -> None:
  clash = sorted(set(into) & set(more))
  if clash:
    raise ValueError(f"{where} metrics {clash} clash with metrics already reported")
  into.update({k: float(v) for k, v in more.items()})


def hook_states(hooks: Sequence[StepHook]) -> dict[str, dict]:
  """What every checkpoint saves under EXTRA_HOOKS: each hook's state by its name."""
  names = [h.name for h in hooks]
  if len(set(names)) != len(names):
    raise ValueError(f"hook names must be unique, got {names}")
  return {h.name: h.state() for h in hooks}


def restore_hooks(hooks: Sequence[StepHook], extra: Mapping[str, Any], params,
                  step: int) -> None:
  """Hands each hook the state its checkpoint saved (`extra` as restore_or_initialize gave)."""
  saved = extra.get(EXTRA_HOOKS, {})
  for hook in hooks:
    hook.restore(saved.get(hook.name, {}), params, step)


def train_loop(*, trainer: Trainer, state: TrainState, batches: DeterministicIterator,
               start_step: int, num_steps: int, checkpoint_manager: CheckpointManager,
               checkpoint_every: int, log_every: int, metrics_writer: MetricsWriter,
               prepare: Callable[[int, Any, Any], Mapping[str, Any]] | None = None,
               hooks: Sequence[StepHook] = (), progress: bool = True) -> LoopResult:
  """Trains from `start_step` until the state has taken `num_steps` updates in total.

  `num_steps` is the run's total, not a count for this call, so a restarted run passes the
  same value. Before each update the hooks' `before_step` run, then `prepare(step, params,
  raw)` turns the iterator's raw item into the model batch (the item itself when None); after
  it the hooks' `after_step` run, and any of them returning True stops training (with a
  checkpoint). Metrics are logged every `log_every` steps and at the end; checkpoints are
  saved every `checkpoint_every` steps (0: only at the end) and at the end. Raises
  TrainingDiverged on a NaN/inf loss after checkpointing the last good state.
  """
  if int(state.step) != start_step:
    raise ValueError(f"start_step={start_step} but the state has taken {int(state.step)} steps")
  if num_steps < start_step:
    raise InputError(f"the run is already at step {start_step}, past num_steps={num_steps}",
                     field="num_steps")
  if log_every < 1 or checkpoint_every < 0:
    raise InputError(f"need log_every >= 1 and checkpoint_every >= 0, got {log_every} and "
                     f"{checkpoint_every}", field="log_every" if log_every < 1 else
                     "checkpoint_every")
  metrics_writer.truncate_after(start_step)
  bar = _Progress(enabled=progress, num_steps=num_steps)
  saved_step = checkpoint_manager.latest_step()

  def save(step: int, state: TrainState, data_state: dict) -> None:
    nonlocal saved_step
    if saved_step == step:
      return
    extra = {EXTRA_STEP: step, EXTRA_DATA: data_state, EXTRA_DROPOUT_SEED: trainer.dropout_seed,
             EXTRA_HOOKS: hook_states(hooks)}
    checkpoint_manager.save(step, state, extra)
    saved_step = step

  step, metrics = start_step, {}
  interval_start, interval_step = time.monotonic(), start_step
  try:
    while step < num_steps:
      data_state = batches.get_state()
      try:
        raw = next(batches)
      except StopIteration:
        raise InputError(f"the data ran out before step {step + 1} of {num_steps}",
                         field="num_steps") from None
      host_metrics: dict[str, float] = {}
      for hook in hooks:
        _merge_host_metrics(host_metrics, hook.before_step(step, state.params),
                            f"hook {hook.name!r}")
      batch = prepare(step, state.params, raw) if prepare is not None else raw
      batch, prepared_metrics = _host_metrics(batch)
      _merge_host_metrics(host_metrics, prepared_metrics, "prepared batch")
      state, device_metrics = trainer.train_step(state, batch)
      metrics = {k: float(v) for k, v in jax.device_get(device_metrics).items()}
      if not (math.isfinite(metrics["loss"]) and math.isfinite(metrics["grad_norm"])):
        save(step, state, data_state)  # the step was not applied: this is the last good state
        checkpoint_manager.wait_until_finished()
        raise TrainingDiverged(step + 1, step, metrics, checkpoint_manager.directory)
      step += 1
      clash = sorted(set(host_metrics) & set(metrics))
      if clash:
        raise ValueError(f"host metrics {clash} clash with the step's own metrics")
      metrics.update(host_metrics)
      stop = False
      for hook in hooks:
        stop = bool(hook.after_step(step, metrics)) or stop
      last = stop or step == num_steps
      if step == start_step + 1 and step % log_every and not last:
        # The first step compiled the program: the rate (and the ETA) start after it.
        interval_start, interval_step = time.monotonic(), step
      if step % log_every == 0 or last:
        now = time.monotonic()
        rate = (step - interval_step) / max(now - interval_start, 1e-9)
        interval_start, interval_step = now, step
        metrics_writer.write(step, metrics, volatile={"steps_per_second": rate})
        bar.show(step, metrics, rate)
      if (checkpoint_every and step % checkpoint_every == 0) or last:
        save(step, state, batches.get_state())
      if stop:
        break
    checkpoint_manager.wait_until_finished()
  finally:
    bar.close()
  return LoopResult(state=state, step=step, metrics=metrics)
