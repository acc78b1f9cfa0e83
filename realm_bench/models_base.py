"""The contract between a model and the generic training core.

The trainer, partitioner and checkpointer only ever call these four methods, so a REALM
pre-training model, an Open-QA model and the tests' toy model are interchangeable to them.
Methods are pure functions of their arguments (no hidden state), which is what lets the
trainer jit them and lets a resumed run reproduce an uninterrupted one exactly.
"""
from __future__ import annotations

import abc
from typing import Any, Mapping

import jax

Batch = Mapping[str, Any]
Params = Any


class BaseModel(abc.ABC):
  """A model as the training core sees it: parameters in, scalars and arrays out.

  Batches are dicts of arrays whose leading dimension is the batch; the partitioner shards
  that dimension over the "data" mesh axis, so every array in a batch must have one.
  """

  @abc.abstractmethod
  def init_params(self, rng: jax.Array, batch: Batch) -> Params:
    """Returns the "params" collection for inputs shaped like `batch`.

    Leaves may be boxed with `nn.with_logical_partitioning` names; the partitioner maps
    those names to mesh axes and unboxes them, so the other methods always get plain arrays.
    """

  @abc.abstractmethod
  def loss_fn(self, params: Params, batch: Batch,
              dropout_rng: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Returns (scalar loss to minimise, dict of scalar metrics to log)."""

  @abc.abstractmethod
  def predict_batch(self, params: Params, batch: Batch) -> dict[str, jax.Array]:
    """Returns predictions, each array with the batch as its leading dimension."""

  @abc.abstractmethod
  def score_batch(self, params: Params, batch: Batch) -> jax.Array:
    """Returns one score per example (e.g. the log-likelihood of its targets)."""
