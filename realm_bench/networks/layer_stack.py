"""Converting parameters between the unscanned and the scanned layer layouts of `BertEncoder`.

`BertConfig.scan_layers` changes only where a layer's weights live: `layer_0` ... `layer_{n-1}`
(one subtree each) or `layers` (one subtree, every leaf stacked on a leading axis of n). The
values and the forward pass are the same, so a run of one layout continues or warm-starts in
the other after `stack_layers` / `unstack_layers`; without them, warm starts and restores
refuse the tree and name the knob (`versions.mismatch_hint`).

Both work on any nested tree (a model's params, a TrainState's optimiser moments): every dict
that holds an encoder's layers is converted wherever it sits, everything else is kept.
"""
from __future__ import annotations

import re
from typing import Any

import jax
import numpy as np

from realm_bench.errors import InputError

STACKED = "layers"
_LAYER = re.compile(r"layer_(\d+)$")


def _layer_keys(tree: dict) -> list[str]:
  return sorted((k for k in tree if isinstance(k, str) and _LAYER.match(k)),
                key=lambda k: int(_LAYER.match(k).group(1)))


def _convert(tree: Any, fn) -> Any:
  if isinstance(tree, dict):
    return fn({k: _convert(v, fn) for k, v in tree.items()})
  if isinstance(tree, tuple) and hasattr(tree, "_fields"):   # optax states are NamedTuples
    return type(tree)(*(_convert(v, fn) for v in tree))
  if isinstance(tree, (list, tuple)):
    return type(tree)(_convert(v, fn) for v in tree)
  return tree


def _stack_one(tree: dict) -> dict:
  keys = _layer_keys(tree)
  if not keys:
    return tree
  if STACKED in tree:
    raise InputError(f"the tree has both {STACKED!r} and {keys[0]!r}: not one layout",
                     field="scan_layers")
  if keys != [f"layer_{i}" for i in range(len(keys))]:
    raise InputError(f"layers {keys} are not numbered 0..{len(keys) - 1}", field="scan_layers")
  layers = [tree[k] for k in keys]
  first = jax.tree.structure(layers[0])
  for k, layer in zip(keys, layers):
    if jax.tree.structure(layer) != first:
      raise InputError(f"{k!r} has other parameters than 'layer_0'", field="scan_layers")
  out = {k: v for k, v in tree.items() if k not in keys}
  out[STACKED] = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *layers)
  return out


def _unstack_one(tree: dict) -> dict:
  if STACKED not in tree or not isinstance(tree[STACKED], dict):
    return tree
  leaves = jax.tree.leaves(tree[STACKED])
  counts = {np.shape(x)[0] if np.ndim(x) else None for x in leaves}
  if len(counts) != 1 or None in counts:
    raise InputError(f"the leaves of {STACKED!r} do not share one leading layer axis "
                     f"({sorted(map(str, counts))})", field="scan_layers")
  if _layer_keys(tree):
    raise InputError(f"the tree has both {STACKED!r} and {_layer_keys(tree)[0]!r}",
                     field="scan_layers")
  out = {k: v for k, v in tree.items() if k != STACKED}
  for i in range(counts.pop()):
    out[f"layer_{i}"] = jax.tree.map(lambda x, i=i: np.asarray(x)[i], tree[STACKED])
  return out


def stack_layers(tree: Any) -> Any:
  """Unscanned -> scanned: every `layer_0..layer_{n-1}` group becomes one stacked `layers`."""
  return _convert(tree, _stack_one)


def unstack_layers(tree: Any) -> Any:
  """Scanned -> unscanned: every stacked `layers` subtree becomes `layer_0..layer_{n-1}`."""
  return _convert(tree, _unstack_one)
