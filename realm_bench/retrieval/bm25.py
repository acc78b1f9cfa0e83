"""BM25 over corpus blocks: the word-overlap baseline that a learned retriever must beat.

At paper scale the standard tool is pyserini (Lucene/Anserini, what DPR's BM25 numbers come
from); it needs a JVM and an index build step. Here `bm25s` does the scoring: pure Python on
numpy/scipy sparse matrices, no JVM, milliseconds for the synthetic world's few thousand
blocks, so tests and the world's fitness gates can run it anywhere. The defaults follow
Anserini's (k1=0.9, b=0.4, Lucene's idf), so the numbers mean what BM25 numbers usually mean.

A block is indexed as its title and body together; text is lower-cased and split into runs of
two or more word characters, with bm25s's English stopwords (Lucene's 33) removed, and no
stemming. Ties are broken by corpus order, so results are deterministic.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import logging

import bm25s
import numpy as np

logging.getLogger("bm25s").setLevel(logging.WARNING)   # it logs every index build at DEBUG


def tokenize(texts: Sequence[str]) -> list[list[str]]:
  return bm25s.tokenize(list(texts), lower=True, stopwords="en", return_ids=False,
                        show_progress=False)


class Bm25Retriever:
  """An in-memory BM25 index of (id, title, body) blocks.

  `search` returns, per query, the k best block ids and scores, best first. Only blocks that
  share a word with the query are returned: a row with fewer matches (an empty query, one of
  stopwords only, or k above the corpus size) is padded with id -1 and score 0.
  """

  def __init__(self, blocks: Iterable, *, k1: float = 0.9, b: float = 0.4):
    ids, texts = [], []
    for block in blocks:
      if isinstance(block, (tuple, list)):
        block_id, title, body = block
      else:   # realm_bench.tasks.data.Block or anything with id/title/body
        block_id, title, body = block.id, block.title, block.body
      ids.append(int(block_id))
      texts.append(f"{title} {body}")
    if not ids:
      raise ValueError("BM25 needs at least one block")
    self.ids = np.asarray(ids, np.int64)
    # What a run record lists beside the numbers, as it does a MIPS index's manifest.
    self.manifest = {"kind": "bm25", "num_blocks": len(ids), "k1": k1, "b": b,
                     "library": f"bm25s {bm25s.__version__}"}
    self._model = bm25s.BM25(k1=k1, b=b, method="lucene")
    self._model.index(bm25s.tokenize(texts, lower=True, stopwords="en", show_progress=False),
                      show_progress=False)
    self._vocab = self._model.vocab_dict

  @classmethod
  def from_world(cls, root, **kwargs) -> "Bm25Retriever":
    """Over the corpus blocks of a world or data folder (blocks.jsonl or passages.tsv)."""
    from realm_bench.tasks import data  # pylint: disable=g-import-not-at-top
    return cls(data.iter_blocks(root), **kwargs)

  def scores(self, query: str) -> np.ndarray:
    """BM25 score of every block for one query, in corpus order (0: no shared word)."""
    words = [w for w in tokenize([query])[0] if w in self._vocab]
    if not words:
      return np.zeros(len(self.ids), np.float32)
    return np.asarray(self._model.get_scores(words), np.float32)

  def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores [n, k] float32, ids [n, k] int64), best first, ties in corpus order."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
      raise ValueError(f"k must be a positive integer, got {k!r}")
    out_scores = np.zeros((len(queries), k), np.float32)
    out_ids = np.full((len(queries), k), -1, np.int64)
    rows = np.arange(len(self.ids))
    for i, query in enumerate(queries):
      scores = self.scores(query)
      order = np.lexsort((rows, -scores))[:k]
      order = order[scores[order] > 0]
      out_scores[i, :len(order)] = scores[order]
      out_ids[i, :len(order)] = self.ids[order]
    return out_scores, out_ids
