"""Embedding the corpus with a document tower, in fixed-size batches, and building an index.

Fixed batch shapes mean one compilation for the whole corpus; the last batch is padded and
the padding rows dropped. This is the job an index refresh runs.
"""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Callable, Iterator

import jax
import numpy as np

from realm_bench.retrieval import corpus_embedding


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

  def embed_doc_batch(self, params, ids) -> np.ndarray:
    """One batch through the document tower (build_index does the batching)."""
    return self._docs(params, ids)

  def embed_docs(self, params, ids, *, batch_size: int = 256, progress=None) -> np.ndarray:
    return embed_in_batches(lambda x: self._docs(params, x), ids, batch_size=batch_size,
                            progress=progress)

  def embed_queries(self, params, ids, *, batch_size: int = 256) -> np.ndarray:
    return embed_in_batches(lambda x: self._queries(params, x), ids, batch_size=batch_size)


def build_index(*, embed_fn: Callable[[np.ndarray], np.ndarray], index_factory: Callable,
                manifest: dict, batch_size: int = 256, doc_inputs: np.ndarray | None = None,
                ids: np.ndarray | None = None,
                make_batches: Callable[[int], Iterator[tuple[np.ndarray, np.ndarray]]] | None = None,
                work_dir=None, fingerprint: dict | None = None, shard_rows: int = 1 << 16,
                total: int | None = None, progress: bool = False,
                save: Callable | None = None):
  """Embeds a corpus with `embed_fn` ([b, L] ids -> [b, D]) and builds an index of it.

  Every index in the project is made here: the synchronous refresh, the asynchronous builder,
  the frozen index of a fine-tuning run, zero-shot recall and `realm-bench index`. Two ways in:
  `doc_inputs` + `ids` held in memory (the synthetic world, a few thousand blocks), or
  `make_batches(skip_rows)` streamed through resumable shards in `work_dir` (paper scale: see
  `corpus_embedding`), which are removed once the index is saved with `save(index)`. The
  manifest gets `embed_seconds`, `blocks_per_second` and `build_seconds` (embedding included).
  """
  if make_batches is not None and save is None:
    raise ValueError("a streamed build must be saved: its embeddings live in work_dir")
  clock = time.perf_counter()
  if make_batches is None:
    embeddings = embed_in_batches(embed_fn, doc_inputs, batch_size=batch_size)
  else:
    corpus_embedding.embed_to_shards(
        embed_fn=embed_fn, make_batches=make_batches, out_dir=work_dir,
        fingerprint=fingerprint or {}, batch_size=batch_size, shard_rows=shard_rows,
        total=total, progress=progress)
    embeddings, ids = corpus_embedding.assemble(work_dir, Path(work_dir) / "all.npy")
  embed_seconds = time.perf_counter() - clock
  index = index_factory()
  index.build(embeddings, ids, manifest=dict(manifest))
  index.manifest.update(
      embed_seconds=round(embed_seconds, 4),
      blocks_per_second=round(embeddings.shape[0] / max(embed_seconds, 1e-9), 1),
      build_seconds=round(time.perf_counter() - clock, 4))
  if save is not None:
    save(index)
  if make_batches is not None:   # the index is saved (or in memory): the shards can go
    del embeddings
    shutil.rmtree(work_dir, ignore_errors=True)
  return index
