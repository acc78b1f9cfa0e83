"""BM25 over a handful of hand-written blocks: exact rankings, Lucene's scores, edge queries."""
from __future__ import annotations

import math

import numpy as np
import pytest

from realm_bench.io_utils import atomic_write_jsonl
from realm_bench.retrieval.bm25 import Bm25Retriever
from realm_bench.tasks import data

BLOCKS = [(10, "Tharmouth", "The river Alder flows through the town."),
          (11, "Vamel Drosk", "Drosk was born in 1850."),
          (12, "Vamel Drosk", "Drosk plays the violin."),
          (13, "Pela Drosk", "Pela Drosk is a native of Tharmouth."),
          (14, "Gathos Trust", "The firm makes soap.")]


@pytest.fixture(scope="module")
def bm25() -> Bm25Retriever:
  return Bm25Retriever(BLOCKS)


def test_ranking_title_and_body_words(bm25):
  scores, ids = bm25.search(["when was vamel drosk born", "Drosk"], 4)
  assert scores.dtype == np.float32 and ids.dtype == np.int64 and ids.shape == (2, 4)
  # Both name words and "born"; both name words; the surname only; nothing else shares a word.
  assert ids[0].tolist() == [11, 12, 13, -1]
  assert scores[0, 0] > scores[0, 1] > scores[0, 2] > 0 and scores[0, 3] == 0
  # The surname twice in 11 and 12 (title and body), and in the slightly longer 13.
  assert ids[1].tolist() == [11, 12, 13, -1]


def test_ties_keep_corpus_order(bm25):
  scores, ids = bm25.search(["where is tharmouth"], 3)
  assert ids[0].tolist() == [10, 13, -1]   # same term frequency and length
  assert scores[0, 0] == scores[0, 1]


def test_lucene_score_and_lower_casing(bm25):
  """One term in one of five blocks: idf ln(1 + (N - df + .5) / (df + .5)) times
  tf / (tf + k1 (1 - b + b dl / avgdl)), with Anserini's k1 = 0.9, b = 0.4."""
  scores, ids = bm25.search(["SOAP"], 1)
  lengths = [6, 5, 5, 6, 5]   # words left after lower-casing and dropping stopwords
  avgdl = sum(lengths) / len(lengths)
  expected = math.log(1 + 4.5 / 1.5) / (1 + 0.9 * (1 - 0.4 + 0.4 * 5 / avgdl))
  assert ids[0].tolist() == [14]
  assert scores[0, 0] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("query", ["", "   ", "the of is", "zebra", "a"])
def test_queries_without_indexed_words_return_nothing(bm25, query):
  scores, ids = bm25.search([query], 3)
  assert ids.tolist() == [[-1, -1, -1]] and scores.tolist() == [[0.0, 0.0, 0.0]]


def test_k_above_corpus_size_pads_and_bad_k_is_refused(bm25):
  _, ids = bm25.search(["drosk tharmouth river soap firm"], 8)
  assert sorted(ids[0][:5].tolist()) == [10, 11, 12, 13, 14] and ids[0][5:].tolist() == [-1] * 3
  assert bm25.search([], 3)[1].shape == (0, 3)
  for k in (0, -1, 2.0, True):
    with pytest.raises(ValueError, match="k must be"):
      bm25.search(["drosk"], k)
  with pytest.raises(ValueError, match="at least one block"):
    Bm25Retriever([])


def test_built_from_corpus_blocks(tmp_path, bm25):
  atomic_write_jsonl(tmp_path / data.BLOCKS_JSONL,
                     [{"id": i, "title": t, "body": b} for i, t, b in BLOCKS])
  from_world = Bm25Retriever.from_world(tmp_path)
  from_blocks = Bm25Retriever(data.Block(*row) for row in BLOCKS)
  queries = ["who plays the violin", "vamel drosk tharmouth"]
  for other in (from_world, from_blocks):
    np.testing.assert_array_equal(other.search(queries, 5)[1], bm25.search(queries, 5)[1])
