"""Embedding the corpus with a document tower, in fixed-size batches.

Fixed batch shapes mean one compilation for the whole corpus; the last batch is padded and
the padding rows dropped. This is the job an index refresh runs.
"""
from __future__ import annotations

from typing import Callable

import jax
import numpy as np


def embed_in_batches(embed_fn: Callable, inputs: np.ndarray, *, batch_size: int = 256,
                     progress: Callable[[int, int], None] | None = None) -> np.ndarray:
  """Applies `embed_fn(ids [b, L]) -> [b, D]` to every row of `inputs`."""
  n = inputs.shape[0]
  batch_size = min(batch_size, max(n, 1))
  out = []
  for start in range(0, n, batch_size):
    chunk = inputs[start:start + batch_size]
    rows = chunk.shape[0]
    if rows < batch_size:
      chunk = np.concatenate([chunk, np.zeros((batch_size - rows,) + chunk.shape[1:],
                                              chunk.dtype)])
    out.append(np.asarray(embed_fn(chunk))[:rows])
    if progress is not None:
      progress(min(start + batch_size, n), n)
  return np.concatenate(out).astype(np.float32)


class Towers:
  """Jitted query and document towers of a retriever model; parameters are arguments, so a
  refresh with new parameters reuses the compiled code."""

  def __init__(self, model):
    self._docs = jax.jit(model.embed_docs)
    self._queries = jax.jit(model.embed_queries)

  def embed_docs(self, params, ids, *, batch_size: int = 256, progress=None) -> np.ndarray:
    return embed_in_batches(lambda x: self._docs(params, x), ids, batch_size=batch_size,
                            progress=progress)

  def embed_queries(self, params, ids, *, batch_size: int = 256) -> np.ndarray:
    return embed_in_batches(lambda x: self._queries(params, x), ids, batch_size=batch_size)
