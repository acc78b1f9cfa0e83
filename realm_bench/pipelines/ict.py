"""ORQA's inverse cloze task: the retriever's warm start (ICT_BATCH)."""
from __future__ import annotations

import dataclasses
import re

import gin
import numpy as np

from realm_bench.pipelines import base, batching, token_file

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _sentences(body: str) -> list[str]:
  return [s for s in _SENTENCE_END.split(body.strip()) if s]


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

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del warm_start_params
    base.check_task_vocabulary(self.corpus_task, model.vocabulary)
    self.lengths = sequence_lengths
    self.corpus = token_file.for_run(self.corpus_task, sequence_lengths.block, run_dir)
    self.specials = base.specials_of(model.vocabulary)
    self.encode = model.vocabulary.encode
    self.usable = np.array([r for r, body in enumerate(self.corpus.bodies)
                            if len(_sentences(body)) >= 2], np.int64)

  @property
  def task_name(self):
    return self.corpus_task

  def stream(self, *, batch_size, seed):
    self.seed = seed
    self.num_examples = len(self.usable)
    return base.example_stream(self.usable, batch_size=batch_size, seed=seed)

  def prepare(self, step, params, raw):
    del params
    rng = np.random.default_rng([self.seed, step, 7])
    s = self.specials
    queries, docs = [], []
    for row in raw:
      sents = [np.asarray(self.encode(x), np.int32) for x in _sentences(self.corpus.bodies[row])]
      pick = int(rng.integers(len(sents)))
      keep = [x for i, x in enumerate(sents) if i != pick or rng.random() >= self.remove_prob]
      queries.append(np.concatenate([[s.cls], sents[pick], [s.sep]]))
      docs.append(np.concatenate([[s.cls], self.corpus.title_ids[row], [s.sep],
                                  *keep, [s.sep]]))
    return {"query_ids": batching.pad_rows(queries, self.lengths.query, truncate=True),
            "doc_ids": batching.pad_rows(docs, self.lengths.block, truncate=True)}
