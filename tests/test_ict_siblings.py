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
