"""Warm starts: a model's parameter subtrees replaced by another run's, every shape checked.

Kept apart from the models because every stage that starts from another run (ICT from BERT,
REALM from ICT and BERT, fine-tuning from REALM, converted checkpoints) goes through it, and
its errors are what a user sees when two runs do not fit together.
"""
from __future__ import annotations

import jax
import numpy as np

from realm_bench.errors import InputError
from realm_bench.networks import versions


def _subtree(tree, path: str):
  for key in path.split("/"):
    if not isinstance(tree, dict) or key not in tree:
      return None
    tree = tree[key]
  return tree


def _with_subtree(tree, path: str, value):
  head, _, rest = path.partition("/")
  tree = dict(tree)
  tree[head] = value if not rest else _with_subtree(tree[head], rest, value)
  return tree


def _shapes(tree, prefix: str) -> dict[str, tuple]:
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {"/".join([prefix, *(str(getattr(k, "key", k)) for k in path)]): tuple(np.shape(x))
          for path, x in leaves}


def warm_start(params, source, subtrees: dict[str, str], *, where: str = "the warm start"):
  """`params` with each subtree `dest` replaced by `source`'s subtree `subtrees[dest]` (paths
  like "retriever/embedder/bert"), every shape checked; a missing subtree is an error, so a
  reader that silently stays random cannot happen."""
  for dest, src in subtrees.items():
    want, got = _subtree(params, dest), _subtree(source, src)
    if want is None:
      raise InputError(f"this model has no subtree {dest!r} (it has {sorted(params)})",
                       field="warm_starts")
    if got is None:
      raise InputError(f"{where} has no subtree {src!r} (it has {sorted(source)})",
                       field="warm_starts")
    want_shapes, got_shapes = _shapes(want, dest), _shapes(got, dest)
    for name in list(want_shapes) + [n for n in got_shapes if n not in want_shapes]:
      if want_shapes.get(name) != got_shapes.get(name):   # the first in the model's order
        hint = versions.mismatch_hint(name, got_shapes.get(name), want_shapes.get(name),
                                       checkpoint_names=got_shapes, model_names=want_shapes)
        if hint is not None:
          raise InputError(f"{where}'s {src!r} does not fit this model's {dest!r}: {hint}",
                           field="warm_starts")
        shape = lambda s: "absent" if s is None else str(s)
        raise InputError(f"{where}'s {src!r} does not fit this model's {dest!r} (a different "
                         f"model size?): parameter {name!r} is {shape(got_shapes.get(name))} "
                         f"there but {shape(want_shapes.get(name))} here", field="warm_starts")
    params = _with_subtree(params, dest, got)
  return params
