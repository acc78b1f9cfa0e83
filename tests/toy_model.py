"""A tiny classifier implementing BaseModel, and a resumable training run built on it.

The training core is model-agnostic; these tests prove it with a two-layer MLP that has
everything the REALM models will have at a small scale: logical partitioning names on its
weights, a LayerNorm, biases and dropout (so the per-step RNG matters for exact resumes).
`run_training` is also executed as a script in subprocesses (kill -9 and multi-device tests).
"""
from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import linen as nn

from realm_bench import (checkpoints, distributed, iteration, metrics_io, optim, partitioning,
                         trainer)
from realm_bench.models_base import BaseModel

IN_DIM = 8
NUM_CLASSES = 4
BATCH_SIZE = 8


def _boxed(init, names):
  return nn.with_logical_partitioning(init, names)


class ToyMLP(nn.Module):
  hidden: int
  dropout: float

  @nn.compact
  def __call__(self, x, *, train: bool):
    h = nn.Dense(self.hidden, kernel_init=_boxed(nn.initializers.lecun_normal(), ("embed", "mlp")),
                 bias_init=_boxed(nn.initializers.zeros, ("mlp",)))(x)
    h = nn.LayerNorm(scale_init=_boxed(nn.initializers.ones, ("mlp",)),
                     bias_init=_boxed(nn.initializers.zeros, ("mlp",)))(nn.gelu(h))
    h = nn.Dropout(self.dropout, deterministic=not train)(h)
    return nn.Dense(NUM_CLASSES,
                    kernel_init=_boxed(nn.initializers.lecun_normal(), ("mlp", "vocab")),
                    bias_init=_boxed(nn.initializers.zeros, ("vocab",)))(h)


@dataclasses.dataclass(frozen=True)
class ToyModel(BaseModel):
  hidden: int = 16
  dropout: float = 0.1

  @property
  def module(self) -> ToyMLP:
    return ToyMLP(self.hidden, self.dropout)

  def init_params(self, rng, batch):
    return self.module.init(rng, batch["inputs"], train=False)["params"]

  def loss_fn(self, params, batch, dropout_rng):
    logits = self.module.apply({"params": params}, batch["inputs"], train=True,
                               rngs={"dropout": dropout_rng})
    loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
    accuracy = (logits.argmax(-1) == batch["labels"]).mean()
    return loss, {"accuracy": accuracy}

  def predict_batch(self, params, batch):
    logits = self.module.apply({"params": params}, batch["inputs"], train=False)
    return {"label": logits.argmax(-1)}

  def score_batch(self, params, batch):
    logits = self.module.apply({"params": params}, batch["inputs"], train=False)
    log_probs = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(log_probs, batch["labels"][:, None], axis=-1)[:, 0]


class SimulatedCrash(Exception):
  pass


_TEACHER = np.random.default_rng(1234).normal(size=(IN_DIM, NUM_CLASSES))


def make_batches(seed: int, position: int, *, nan_at: int | None = None):
  """Batch i depends only on (seed, i), so any position can be produced directly."""
  i = position
  while True:
    rng = np.random.default_rng([seed, i])
    inputs = rng.normal(size=(BATCH_SIZE, IN_DIM)).astype(np.float32)
    if i == nan_at:
      inputs[0, 0] = np.nan
    yield {"inputs": inputs, "labels": (inputs @ _TEACHER).argmax(-1).astype(np.int32)}
    i += 1


def toy_trainer(*, hidden: int = 16, learning_rate: float = 1e-2,
                num_partitions: int = 1) -> trainer.Trainer:
  """One Trainer per configuration, so runs in one process share its compiled steps."""
  return _cached_trainer(hidden, learning_rate, num_partitions)


@functools.cache
def _cached_trainer(hidden: int, learning_rate: float, num_partitions: int) -> trainer.Trainer:
  tx = optim.make_optimizer(learning_rate=learning_rate, warmup_steps=3, total_steps=40)
  return trainer.Trainer(ToyModel(hidden=hidden), tx,
                         partitioning.Partitioner(num_partitions=num_partitions), dropout_seed=7)


def run_training(run_dir, *, num_steps: int, checkpoint_every: int = 2, log_every: int = 1,
                 hidden: int = 16, learning_rate: float = 1e-2, nan_at: int | None = None,
                 step_delay: float = 0.0, tensorboard: bool = False, data_seed: int = 0,
                 keep: int = 3, crash_at: int | None = None,
                 num_partitions: int = 1) -> trainer.LoopResult:
  """Resumes from `run_dir/checkpoints` if it has one; trains to `num_steps` in total.

  `crash_at` raises SimulatedCrash before the update after step `crash_at`, i.e. after that
  step's metrics row is written but typically after the last checkpoint. In a multi-process
  run each process feeds its rows of every global batch (`distributed.shard_batches`).
  """
  run_dir = Path(run_dir)
  the_trainer = toy_trainer(hidden=hidden, learning_rate=learning_rate,
                            num_partitions=num_partitions)
  batches = distributed.shard_batches(iteration.DeterministicIterator(
      lambda seed, position: make_batches(seed, position, nan_at=nan_at), seed=data_seed))
  manager = checkpoints.CheckpointManager(run_dir / "checkpoints", keep=keep)
  state, start, _ = trainer.restore_or_initialize(
      trainer=the_trainer, checkpoint_manager=manager, batches=batches,
      rng=jax.random.PRNGKey(0), init_batch=batches.peek())

  class _Faults(iteration.StepHook):
    name = "faults"

    def before_step(self, step, params):
      del params
      if step == crash_at:
        raise SimulatedCrash(f"crash before step {step + 1}")
      return {}

    def after_step(self, step, metrics):
      del step, metrics
      if step_delay:
        time.sleep(step_delay)
      return False
  try:
    return trainer.train_loop(
        trainer=the_trainer, state=state, batches=batches, start_step=start,
        num_steps=num_steps, checkpoint_manager=manager, checkpoint_every=checkpoint_every,
        log_every=log_every,
        metrics_writer=metrics_io.MetricsWriter(run_dir, tensorboard=tensorboard),
        hooks=[_Faults()], progress=False)
  finally:
    manager.close()
