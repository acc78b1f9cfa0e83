"""ORQA's inverse cloze task: the retriever's warm start (ICT_BATCH)."""
from __future__ import annotations

import collections
import dataclasses
import re

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.pipelines import base, batching, token_file

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(body: str) -> list[str]:
  return [s for s in _SENTENCE_END.split(body.strip()) if s]


def articles(rows, titles) -> dict[int, list[int]]:
  """Each row -> the rows of its article (same title), itself included."""
  by_title = collections.defaultdict(list)
  for r in rows:
    by_title[titles[int(r)]].append(int(r))
  return {r: same for same in by_title.values() for r in same}


def namesakes(rows, titles) -> dict[int, list[int]]:
  """Each row -> the rows whose title is another title sharing a word with its own (a
  person's namesakes: "Losou Kibarai" and "Krubi Kibarai")."""
  by_word = collections.defaultdict(set)
  for r in rows:
    for word in set(titles[int(r)].lower().split()):
      by_word[word].add(int(r))
  out = {}
  for r in rows:
    title = titles[int(r)]
    near = set().union(*(by_word[w] for w in set(title.lower().split())))
    out[int(r)] = sorted(x for x in near if titles[x] != title)
  return out


@gin.configurable
@dataclasses.dataclass
class IctPipeline(base.Pipeline):
  """A sentence of a block is the pseudo-query, the block is its pseudo-evidence.

  With probability `remove_prob` (0.9 in ORQA) the sentence is removed from the block, so the
  retriever must learn more than word overlap. The sentences are re-encoded from the block's
  text, so both the query and the block are cut to their lengths, as ORQA cuts them; they are
  encoded for each batch's blocks as it is prepared, so no per-block list of the corpus is
  held (13.35M blocks at paper scale), only the rows with two sentences or more.
  """
  corpus_task: str = "realm_bench.synthetic.corpus"
  remove_prob: float = 0.9
  # Other blocks of each pseudo-query's own article (same title) put in its batch, so that the
  # in-batch negatives include blocks about the same subject. 0: ORQA's batches, whose
  # negatives are about other subjects almost always (at batch 64 over the default world's 894
  # titles about 4 of 64 queries have a sibling in their batch), so matching the subject wins
  # ICT, and little teaches the retriever which of a subject's blocks a query is about
  # (EXPERIMENTS.md E86).
  # Batches keep their size: batch_size / (1 + siblings_per_block) queries bring their
  # siblings (blocks of other titles where an article has too few).
  siblings_per_block: int = 0
  # Blocks of namesakes (other titles sharing a word with the query's: people who share a
  # surname) put in its batch after its siblings. 0: ORQA's batches, where a namesake is
  # rarely a negative, so nothing asks the document tower to encode the first name that alone
  # tells apart two people's blocks naming them by surname; the fine-tuned dense retriever
  # then ranks a namesake's block of the asked relation before the gold block for 60% of the
  # people questions. Tried at 1 in EXPERIMENTS.md E97: recall falls (43.8 -> 31.8 R@5), since
  # a pseudo-query names the person by surname and only unlearning it beats the negative.
  namesakes_per_block: int = 0
  # The probability that a pseudo-query starts with its block's title, as the questions name
  # their subject in full where the passages name a person by surname. 0: ORQA's pseudo-queries
  # (the sentence alone), which never ask the towers to encode a first name. Tried at 0.5 in
  # E97 (with sibling and namesake negatives): the towers match titles and lose the subject.
  title_in_query_prob: float = 0.0

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del warm_start_params
    for field in ("siblings_per_block", "namesakes_per_block"):
      value = getattr(self, field)
      if not isinstance(value, int) or value < 0:
        raise InputError(f"must be a non-negative integer, got {value!r}",
                         field=f"IctPipeline.{field}")
    if not 0.0 <= self.title_in_query_prob <= 1.0:
      raise InputError(f"must be a probability in [0, 1], got {self.title_in_query_prob!r}",
                       field="IctPipeline.title_in_query_prob")
    base.check_task_vocabulary(self.corpus_task, model.vocabulary)
    self.lengths = sequence_lengths
    self.corpus = token_file.for_run(self.corpus_task, sequence_lengths.block, run_dir)
    self.specials = base.specials_of(model.vocabulary)
    self.encode = model.vocabulary.encode
    self.usable = np.array([r for r, body in enumerate(self.corpus.bodies)
                            if len(_sentences(body)) >= 2], np.int64)
    self.siblings = (articles(self.usable, self.corpus.titles) if self.siblings_per_block
                     else {})
    self.namesakes = (namesakes(self.usable, self.corpus.titles) if self.namesakes_per_block
                      else {})

  @property
  def task_name(self):
    return self.corpus_task

  def stream(self, *, batch_size, seed):
    self.seed = seed
    self.num_examples = len(self.usable)
    group = 1 + self.siblings_per_block + self.namesakes_per_block
    field = ("IctPipeline.siblings_per_block" if self.siblings_per_block
             else "IctPipeline.namesakes_per_block")
    if batch_size % group:
      raise InputError(f"batch_size {batch_size} is not a multiple of 1 + siblings_per_block "
                       f"+ namesakes_per_block = {group}", field=field)
    if group > 1 and batch_size > len(self.usable):
      raise InputError(f"batch_size {batch_size} is more than the {len(self.usable)} blocks "
                       "a batch of distinct blocks can hold", field=field)
    self.batch_size = batch_size
    return base.example_stream(self.usable, batch_size=batch_size // group, seed=seed)

  def _with_siblings(self, rng, anchors) -> list[int]:
    """The anchors, then up to `siblings_per_block` other blocks of each one's title and up to
    `namesakes_per_block` blocks of its namesakes, then blocks of any title: `batch_size`
    distinct rows."""
    rows = [int(r) for r in anchors]
    taken = set(rows)
    for r in anchors:
      for pools, count in ((self.siblings, self.siblings_per_block),
                           (self.namesakes, self.namesakes_per_block)):
        if not count:
          continue
        pool = [x for x in pools[int(r)] if x not in taken]
        for x in rng.permutation(pool)[:count].tolist():
          rows.append(x)
          taken.add(x)
    while len(rows) < self.batch_size:
      x = int(self.usable[rng.integers(len(self.usable))])
      if x not in taken:
        rows.append(x)
        taken.add(x)
    return rows

  def prepare(self, step, params, raw):
    del params
    rng = np.random.default_rng([self.seed, step, 7])
    if self.siblings_per_block or self.namesakes_per_block:
      raw = self._with_siblings(np.random.default_rng([self.seed, step, 8]), raw)
    s = self.specials
    queries, docs = [], []
    for row in raw:
      sents = [np.asarray(self.encode(x), np.int32) for x in _sentences(self.corpus.bodies[row])]
      pick = int(rng.integers(len(sents)))
      keep = [x for i, x in enumerate(sents) if i != pick or rng.random() >= self.remove_prob]
      title = (self.corpus.title_ids[row] if self.title_in_query_prob
               and rng.random() < self.title_in_query_prob else [])
      queries.append(np.concatenate([[s.cls], title, sents[pick], [s.sep]]).astype(np.int32))
      docs.append(np.concatenate([[s.cls], self.corpus.title_ids[row], [s.sep],
                                  *keep, [s.sep]]))
    return {"query_ids": batching.pad_rows(queries, self.lengths.query, truncate=True),
            "doc_ids": batching.pad_rows(docs, self.lengths.block, truncate=True)}
