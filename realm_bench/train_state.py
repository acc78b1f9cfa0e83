"""The training state: everything a checkpoint must hold to continue bit-for-bit.

The dropout RNG is deliberately not here: it is derived from `step` each step, so nothing
random is carried and a restored state replays exactly what the uninterrupted run did.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax
from flax import serialization, struct


class TrainState(struct.PyTreeNode):
  """Step counter, parameters and optimizer state; `tx` is static (not saved, not traced)."""
  step: jax.Array
  params: Any
  opt_state: Any
  tx: optax.GradientTransformation = struct.field(pytree_node=False)

  @classmethod
  def create(cls, params, tx: optax.GradientTransformation) -> TrainState:
    return cls(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params), tx=tx)

  def apply_gradients(self, grads) -> TrainState:
    updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
    return self.replace(step=self.step + 1, params=optax.apply_updates(self.params, updates),
                        opt_state=opt_state)

  def to_state_dict(self) -> dict[str, Any]:
    """Nested dicts of arrays (optax named tuples become dicts): what checkpoints store."""
    return serialization.to_state_dict(self)

  def from_saved(self, state_dict: dict[str, Any]) -> TrainState:
    """This state's structure (and `tx`) filled with values from `to_state_dict` output."""
    return serialization.from_state_dict(self, state_dict)
