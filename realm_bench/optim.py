"""BERT's AdamW, as REALM's released code trains with it, written as an optax chain.

Two details differ from `optax.adamw` on purpose, because REALM (and BERT) use them:
  * no Adam bias correction: BERT's `AdamWeightDecayOptimizer` divides the raw moving
    averages, which makes the first updates larger than bias-corrected Adam's;
  * decoupled weight decay is added to the Adam direction *before* the learning rate
    multiplies both, and it skips biases and LayerNorm parameters (BERT excludes
    "bias" and "LayerNorm" by name; in Flax those are leaves called "bias"/"scale").
Gradients are clipped to a global norm first, as BERT does.

`lr_multipliers` gives a top-level parameter subtree a learning rate of its own (a multiple
of the schedule), e.g. {"retriever": 0.1}: REALM's retriever must move slower than a reader
that is still learning to use what it retrieves, or its gradient (noise while retrieval barely
helps) undoes the ICT warm start.

The schedule warms up linearly from 0 to `learning_rate` over `warmup_steps`, then decays
linearly to 0 at `total_steps`. (BERT's own code decays from step 0 and overrides the first
`warmup_steps` with the ramp, so it never quite reaches the peak; with the paper's 200k steps
the two differ by well under 1% after warm-up.) The update applied at step s (0-based) uses
the rate schedule(s), so the very first update has rate 0, as in BERT.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple

import gin
import jax
import jax.numpy as jnp
import optax

from realm_bench.errors import InputError

_LAYER_NORM = re.compile(r"layer_?norm|^ln(_|$)", re.IGNORECASE)
_NO_DECAY_NAMES = frozenset({"bias", "scale"})


def make_schedule(*, learning_rate: float, warmup_steps: int, total_steps: int) -> optax.Schedule:
  if total_steps <= 0:
    raise InputError(f"must be positive, got {total_steps}", field="total_steps")
  if not 0 <= warmup_steps <= total_steps:
    raise InputError(f"must be in [0, total_steps={total_steps}], got {warmup_steps}",
                     field="warmup_steps")
  decay = optax.linear_schedule(learning_rate, 0.0, total_steps - warmup_steps)
  if warmup_steps == 0:
    return decay
  warmup = optax.linear_schedule(0.0, learning_rate, warmup_steps)
  return optax.join_schedules([warmup, decay], [warmup_steps])


def _path_names(path) -> list[str]:
  """Dict keys along a tree path; box attributes (".value") and indices are not names."""
  return [str(k.key) for k in path if isinstance(k, jax.tree_util.DictKey)]


def decays(path_names: list[str]) -> bool:
  """Whether weight decay applies to the leaf at this path (BERT's exclusion list)."""
  if path_names and path_names[-1] in _NO_DECAY_NAMES:
    return False
  return not any(_LAYER_NORM.search(name) for name in path_names[:-1])


def weight_decay_mask(params) -> Any:
  """A tree of bools like `params`: True where weight decay applies."""
  return jax.tree_util.tree_map_with_path(lambda path, _: decays(_path_names(path)), params)


class BertAdamState(NamedTuple):
  mu: Any
  nu: Any


def scale_by_bert_adam(b1: float, b2: float, eps: float) -> optax.GradientTransformation:
  """Adam's direction m / (sqrt(v) + eps) without bias correction, as in BERT."""

  def init(params):
    zeros = lambda p: jnp.zeros_like(p, dtype=jnp.float32)
    return BertAdamState(mu=jax.tree.map(zeros, params), nu=jax.tree.map(zeros, params))

  def update(grads, state, params=None):
    del params
    mu = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state.mu, grads)
    nu = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), state.nu, grads)
    updates = jax.tree.map(lambda m, v, g: (m / (jnp.sqrt(v) + eps)).astype(g.dtype),
                           mu, nu, grads)
    return updates, BertAdamState(mu=mu, nu=nu)

  return optax.GradientTransformation(init, update)


def scale_subtrees(multipliers: Mapping[str, float]) -> optax.GradientTransformation:
  """Multiplies the updates of each named top-level subtree by its factor."""
  def scale(path, update):
    names = _path_names(path)
    return update * multipliers[names[0]] if names and names[0] in multipliers else update

  def update(updates, state, params=None):
    del params
    return jax.tree_util.tree_map_with_path(scale, updates), state

  return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


@gin.configurable
def make_optimizer(*, learning_rate: float, warmup_steps: int, total_steps: int,
                   weight_decay: float = 0.01, b1: float = 0.9, b2: float = 0.999,
                   eps: float = 1e-6, max_grad_norm: float = 1.0,
                   lr_multipliers: Mapping[str, float] | None = None
                   ) -> optax.GradientTransformation:
  """BERT's AdamW with warm-up and linear decay; the current rate is kept in the opt state.

  The rate is injected as a hyper-parameter so `learning_rate_of(opt_state)` can report the
  value actually applied, whatever schedule produced it.
  """
  schedule = make_schedule(learning_rate=learning_rate, warmup_steps=warmup_steps,
                           total_steps=total_steps)
  multipliers = dict(lr_multipliers or {})
  for name, factor in multipliers.items():
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 0:
      raise InputError(f"must be a number >= 0, got {factor!r}", field=f"lr_multipliers.{name}")

  def bert_adamw(learning_rate):
    steps = [optax.clip_by_global_norm(max_grad_norm),
             scale_by_bert_adam(b1, b2, eps),
             optax.add_decayed_weights(weight_decay, mask=weight_decay_mask),
             optax.scale_by_learning_rate(learning_rate)]
    if multipliers:
      steps.append(scale_subtrees(multipliers))
    return optax.chain(*steps)

  return optax.inject_hyperparams(bert_adamw)(learning_rate=schedule)


def learning_rate_of(opt_state) -> jax.Array | None:
  """The rate used by the latest update, if the optimizer injects one (see make_optimizer)."""
  injected = (optax.InjectHyperparamsState, optax.InjectStatefulHyperparamsState)
  nodes = jax.tree_util.tree_leaves(opt_state, is_leaf=lambda x: isinstance(x, injected))
  found = [node for node in nodes if isinstance(node, injected)]
  if not found or "learning_rate" not in found[0].hyperparams:
    return None
  return found[0].hyperparams["learning_rate"]
