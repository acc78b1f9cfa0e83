"""ICT batches with sibling negatives (blocks of each query's own article in its batch) and
namesake negatives (blocks of titles sharing a word with its own)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.pipelines import ict


def pipeline(siblings_per_block: int, titles: list[str],
             namesakes_per_block: int = 0) -> ict.IctPipeline:
  """The pipeline's batch logic over rows 0..n-1 with these titles, without a corpus."""
  p = ict.IctPipeline(siblings_per_block=siblings_per_block,
                      namesakes_per_block=namesakes_per_block)
  p.usable = np.arange(len(titles), dtype=np.int64)
  p.siblings = ict.articles(p.usable, titles)
  p.namesakes = ict.namesakes(p.usable, titles)
  return p


def test_articles_group_rows_by_title():
  assert ict.articles(np.array([0, 2, 3]), ["a", "b", "a", "b"]) == {0: [0, 2], 2: [0, 2],
                                                                     3: [3]}


def test_namesakes_share_a_title_word_and_never_the_title():
  titles = ["Losou Kibarai", "Losou Kibarai", "Krubi Kibarai", "Krubi Sheho", "Paru"]
  assert ict.namesakes(np.arange(5), titles) == {0: [2], 1: [2], 2: [0, 1, 3], 3: [2],
                                                  4: []}


def test_namesakes_come_after_siblings_in_each_group():
  titles = ["A B", "A B", "C B", "C B", "D E", "F G", "H I", "J K"]
  p = pipeline(1, titles, namesakes_per_block=1)
  anchors = next(iter(p.stream(batch_size=6, seed=0)))
  assert len(anchors) == 2
  rows = p._with_siblings(np.random.default_rng(0), [0, 4])
  assert len(rows) == 6 == len(set(rows))
  assert rows[:4] == [0, 4, 1, rows[3]] and titles[rows[3]] == "C B"   # a sibling, a namesake
  assert titles[rows[4]] != "D E"   # D E has neither: topped up from any title


def test_stream_draws_one_query_per_group_and_batches_keep_their_size():
  titles = [f"t{i // 4}" for i in range(40)]   # ten articles of four blocks
  p = pipeline(3, titles)
  anchors = next(iter(p.stream(batch_size=8, seed=0)))
  assert len(anchors) == 2
  rows = p._with_siblings(np.random.default_rng(0), anchors)
  assert len(rows) == 8 == len(set(rows))
  for i, anchor in enumerate(rows[:2]):
    brought = rows[2 + 3 * i: 5 + 3 * i]
    assert {titles[r] for r in brought} == {titles[anchor]}


def test_short_articles_are_topped_up_with_other_blocks():
  titles = ["a", "a", "b", "c", "d", "e", "f", "g"]
  p = pipeline(3, titles)
  p.stream(batch_size=8, seed=0)
  rows = p._with_siblings(np.random.default_rng(1), [0, 2])
  assert len(rows) == 8 == len(set(rows))
  assert rows[:3] == [0, 2, 1]   # a's one sibling; b has none


def test_without_siblings_the_stream_is_orqas():
  p = pipeline(0, [f"t{i}" for i in range(10)])
  assert len(next(iter(p.stream(batch_size=4, seed=0)))) == 4


@pytest.mark.parametrize("siblings, batch, shown", [
    (3, 6, "not a multiple of 1 + siblings_per_block + namesakes_per_block = 4"),
    (1, 12, "more than the 10 blocks"),
])
def test_bad_batches_name_the_field(siblings, batch, shown):
  p = pipeline(siblings, [f"t{i // 2}" for i in range(10)])
  with pytest.raises(InputError, match=re.escape(shown)) as e:
    p.stream(batch_size=batch, seed=0)
  assert e.value.field == "IctPipeline.siblings_per_block"


@pytest.mark.parametrize("prob", [0.0, 1.0])
def test_title_in_query_prefixes_the_title_or_leaves_orqas_query(prob):
  from types import SimpleNamespace  # pylint: disable=g-import-not-at-top
  p = ict.IctPipeline(title_in_query_prob=prob, remove_prob=1.0)
  p.corpus = SimpleNamespace(bodies=["Aa bb. Cc dd."], title_ids=[np.array([7, 8], np.int32)])
  p.encode = lambda text: [len(w) + 10 for w in text.split()]
  p.specials = SimpleNamespace(cls=1, sep=2)
  p.lengths = SimpleNamespace(query=8, block=16)
  p.seed = 0
  query = p.prepare(0, None, [0])["query_ids"][0].tolist()
  sentence = query[query.index(2) - 2:query.index(2)]
  assert sentence == [12, 13]   # "Aa bb." or "Cc dd.", both encoded as 12, 13
  assert query[:query.index(2) + 1] == [1] + ([7, 8] if prob else []) + sentence + [2]


def test_title_in_query_prob_must_be_a_probability():
  p = ict.IctPipeline(title_in_query_prob=1.5)
  with pytest.raises(InputError, match="probability") as e:
    p.setup(model=None, run_dir=None, sequence_lengths=None)
  assert e.value.field == "IctPipeline.title_in_query_prob"
