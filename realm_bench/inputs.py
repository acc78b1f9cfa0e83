"""Input pipelines: seqio examples in, retrieval-augmented model batches out.

Each pipeline pairs a seqio task with what its model needs between steps:
  IctPipeline       inverse-cloze pairs cut from the corpus blocks (the retriever's warm start);
  RealmPipeline     masked sentences + MIPS over a refreshed index (REALM pre-training);
  OpenQAPipeline    questions + MIPS over an index built once from the pre-trained document
                    tower (ORQA fine-tuning, and the predictions of `evaluate` / `infer`).
The loop calls `stream()` for raw example batches, then `prepare(step, params, raw)` right
before each step: that is where retrieval runs, with the current query tower against the
(possibly stale) index, and where the synchronous refresh happens.

Examples are read through seqio once and kept in memory; the order is a seeded permutation
per epoch, so a resumed run replays exactly the batches an uninterrupted one would see.
"""
from __future__ import annotations

import abc
import dataclasses
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import gin
import numpy as np

from realm_bench import features
from realm_bench.errors import InputError
from realm_bench.retrieval.builder import AsyncRefresher
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex, MipsIndex, load_index
from realm_bench.retrieval.refresh import RefreshConfig, SyncRefresher
from realm_bench.trainer import HOST_METRICS_KEY, DeterministicIterator


# ------------------------------------------------------------------------------------------
# Reading tasks.
# ------------------------------------------------------------------------------------------

def task_examples(task_name: str, split: str) -> list[dict]:
  """Every example of a seqio task split, as numpy, in file order."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  task = seqio.get_mixture_or_task(task_name)
  dataset = task.get_dataset(sequence_length=None, split=split, shuffle=False, num_epochs=1,
                             use_cached=False)
  return list(dataset.as_numpy_iterator())


def load_corpus(task_name: str) -> features.Corpus:
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.metrics import to_text  # pylint: disable=g-import-not-at-top
  blocks = task_examples(task_name, "train")
  return features.Corpus(
      ids=np.array([b["id"] for b in blocks], np.int64),
      titles=[to_text(b["title"]) for b in blocks],
      bodies=[to_text(b["body"]) for b in blocks],
      doc_inputs=features.pad_rows([b["inputs"] for b in blocks], SequenceLengths().block),
      title_ids=[np.asarray(b["title_ids"], np.int32) for b in blocks],
      body_ids=[np.asarray(b["body_ids"], np.int32) for b in blocks],
      body_starts=[np.asarray(b["body_starts"], np.int64) for b in blocks],
      body_ends=[np.asarray(b["body_ends"], np.int64) for b in blocks])


def vocabulary():
  from realm_bench.tasks.vocab import get_vocabulary  # pylint: disable=g-import-not-at-top
  return get_vocabulary()


def specials() -> features.Specials:
  vocab = vocabulary()
  return features.Specials(cls=vocab.cls_id, sep=vocab.sep_id, mask=vocab.mask_id)


def query_len() -> int:
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  return SequenceLengths().query


def example_stream(examples: Sequence[Any], *, batch_size: int, seed: int):
  """A resumable stream of example batches: epoch e visits a permutation seeded by (seed, e)."""
  n = len(examples)
  if n == 0:
    raise ValueError("no examples to train on")

  def make_iterator(seed: int, position: int):
    epoch, offset = divmod(position * batch_size, n)
    order = np.random.default_rng([seed, epoch]).permutation(n)
    while True:
      batch = []
      while len(batch) < batch_size:
        if offset == n:
          epoch, offset = epoch + 1, 0
          order = np.random.default_rng([seed, epoch]).permutation(n)
        batch.append(examples[order[offset]])
        offset += 1
      yield batch

  return DeterministicIterator(make_iterator, seed=seed)


# ------------------------------------------------------------------------------------------
# Pipelines.
# ------------------------------------------------------------------------------------------

class Pipeline(abc.ABC):
  """What the training loop needs from a model's inputs."""

  @abc.abstractmethod
  def setup(self, *, model, run_dir: Path, warm_start_params=None) -> None:
    """Reads the tasks and builds what `prepare` needs (corpus, index, featurisers)."""

  @abc.abstractmethod
  def stream(self, *, batch_size: int, seed: int) -> DeterministicIterator:
    """Raw example batches, resumable at a position."""

  @abc.abstractmethod
  def prepare(self, step: int, params, raw: list[dict]) -> dict:
    """The model batch for `step`: retrieval with `params` happens here."""

  def shape_batch(self, raw: list[dict]) -> dict:
    """A batch of the right shapes without parameters, for initialising the model."""
    return self.prepare(0, None, raw)

  def checkpoint_extra(self) -> dict:
    return {}

  def restore(self, extra: dict, params, step: int) -> None:
    del extra, params, step

  def summary(self) -> dict:
    return {}

  def close(self) -> None:
    """Releases what `setup` started (the asynchronous index builder)."""


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@gin.configurable
@dataclasses.dataclass
class IctPipeline(Pipeline):
  """ORQA's inverse cloze task over the knowledge corpus.

  A sentence of a block is the pseudo-query, the block is its pseudo-evidence; with
  probability `remove_prob` (0.9 in ORQA) the sentence is removed from the block, so the
  retriever must learn more than word overlap.
  """
  corpus_task: str = "realm_bench.synthetic.corpus"
  remove_prob: float = 0.9

  def setup(self, *, model, run_dir, warm_start_params=None):
    self.corpus = load_corpus(self.corpus_task)
    self.specials = specials()
    vocab = vocabulary()
    self.block_len = self.corpus.doc_inputs.shape[1]
    self.sentences = []   # per block: list of wordpiece arrays
    for body in self.corpus.bodies:
      parts = [s for s in _SENTENCE_END.split(body.strip()) if s]
      self.sentences.append([np.asarray(vocab.encode(s), np.int32) for s in parts])
    self.usable = [r for r, s in enumerate(self.sentences) if len(s) >= 2]
    self.query_len = query_len()

  def stream(self, *, batch_size, seed):
    self.seed = seed
    return example_stream(self.usable, batch_size=batch_size, seed=seed)

  def prepare(self, step, params, raw):
    rng = np.random.default_rng([self.seed, step, 7])
    s = self.specials
    queries, docs = [], []
    for row in raw:
      sents = self.sentences[row]
      pick = int(rng.integers(len(sents)))
      keep = [x for i, x in enumerate(sents) if i != pick or rng.random() >= self.remove_prob]
      queries.append(np.concatenate([[s.cls], sents[pick], [s.sep]]))
      docs.append(np.concatenate([[s.cls], self.corpus.title_ids[row], [s.sep],
                                  *keep, [s.sep]]))
    return {"query_ids": features.pad_rows(queries, self.query_len),
            "doc_ids": features.pad_rows(docs, self.block_len)}


@gin.configurable
@dataclasses.dataclass
class RealmPipeline(Pipeline):
  """REALM pre-training: retrieve K-1 blocks per masked sentence, put the null block first.

  `exclude_source_block` drops the block a sentence was taken from (REALM_Wiki, where the
  pre-training text *is* the knowledge corpus). The synthetic world's sentences restate facts
  in other words, like REALM_News's CC-News, so they keep their block.
  """
  pretrain_task: str = "realm_bench.synthetic.pretrain"
  corpus_task: str = "realm_bench.synthetic.corpus"
  num_candidates: int = 8
  max_masks: int = 10
  exclude_source_block: bool = False
  refresh: RefreshConfig = dataclasses.field(default_factory=RefreshConfig)
  index_factory: Callable[[], MipsIndex] = ExactIndex   # gin/retrieval/*.gin choose

  def setup(self, *, model, run_dir, warm_start_params=None):
    self.corpus = load_corpus(self.corpus_task)
    self.examples = task_examples(self.pretrain_task, "train")
    self.specials = specials()
    self.query_len = query_len()
    self.towers = Towers(model)
    if self.refresh.mode == "async":
      self.refresher = AsyncRefresher(
          run_dir=run_dir, config=self.refresh, model=model, doc_ids=self.corpus.ids,
          doc_inputs=self.corpus.doc_inputs, index_prototype=self.index_factory(),
          config_text=gin.config_str())
      self.refresher.start()
    else:
      self.refresher = SyncRefresher(
          doc_inputs=self.corpus.doc_inputs, doc_ids=self.corpus.ids,
          embed_docs=lambda p, ids: self.towers.embed_docs(
              p, ids, batch_size=self.refresh.embed_batch_size),
          index_root=Path(run_dir) / "index", config=self.refresh,
          index_factory=self.index_factory)
    self.staleness = {"count": 0, "sum": 0, "max": 0}

  def stream(self, *, batch_size, seed):
    return example_stream(self.examples, batch_size=batch_size, seed=seed)

  def prepare(self, step, params, raw):
    self.refresher.maybe_refresh(step, params)
    query_ids = features.pad_rows([e["inputs"] for e in raw], self.query_len)
    q = self.towers.embed_queries(params, query_ids, batch_size=len(raw))
    extra = 1 if self.exclude_source_block else 0
    _, retrieved = self.refresher.index.search(q, self.num_candidates - 1 + extra)
    exclude = (np.array([e["block_id"] for e in raw]) if self.exclude_source_block
               else np.full(len(raw), -2))
    cands = features.select_candidates(retrieved, exclude, self.num_candidates - 1)
    batch = features.pretrain_batch(raw, cands, self.corpus, self.specials,
                                    query_len=self.query_len, max_masks=self.max_masks)
    staleness = self.refresher.staleness(step)
    self.staleness["count"] += 1
    self.staleness["sum"] += staleness
    self.staleness["max"] = max(self.staleness["max"], staleness)
    batch[HOST_METRICS_KEY] = {"staleness": staleness,
                               "index_embedder_step": self.refresher.embedder_step}
    return batch

  def checkpoint_extra(self):
    self.refresher.protect()
    return {"index_version": self.refresher.version_path.name,
            "staleness": dict(self.staleness)}

  def restore(self, extra, params, step):
    self.refresher.restore(extra.get("index_version"), params, step)
    self.staleness = dict(extra["staleness"])

  def shape_batch(self, raw):
    ids = np.resize(self.corpus.ids, (len(raw), self.num_candidates - 1))
    return features.pretrain_batch(raw, ids, self.corpus, self.specials,
                                   query_len=self.query_len, max_masks=self.max_masks)

  def summary(self):
    s = self.staleness
    return {**self.refresher.stats(),
            "staleness_mean": s["sum"] / max(s["count"], 1),
            "staleness_max": s["max"],
            "refresh_every_steps": self.refresh.refresh_every_steps,
            "index_manifests": [dict(self.refresher.index.manifest)]}

  def close(self):
    if getattr(self, "refresher", None) is not None:
      self.refresher.close()


@gin.configurable
@dataclasses.dataclass
class OpenQAPipeline(Pipeline):
  """ORQA fine-tuning: the index is built once, from the warm-start document tower, and frozen.

  `retrieve=False` is the closed-book control: every example reads only the null document.
  `index_from` reads an index built by `realm-bench index` (the paper-scale path: the corpus
  is embedded once, in shards, instead of in memory here).
  """
  qa_task: str = "realm_bench.synthetic.nq_open"
  corpus_task: str = "realm_bench.synthetic.corpus"
  num_retrieved: int = 5000     # the retriever's marginal (ORQA: top 5000)
  num_read: int = 5             # blocks the reader reads
  max_span_len: int = 10
  regex_answers: bool = False   # CuratedTREC: answers are regular expressions
  retrieve: bool = True
  index_factory: Callable[[], MipsIndex] = ExactIndex
  index_from: str | None = None

  def setup(self, *, model, run_dir, warm_start_params=None):
    self.corpus = load_corpus(self.corpus_task)
    self.specials = specials()
    self.query_len = query_len()
    self.towers = Towers(model)
    self.proj_dim = model.proj_dim
    vocab = vocabulary()
    self.matcher = features.AnswerMatcher(vocab.encode, regex=self.regex_answers)
    self.index_path = Path(run_dir) / "index" / "frozen"
    self.index = self._frozen_index(warm_start_params)

  def _frozen_index(self, params) -> MipsIndex | None:
    if not self.retrieve:
      return None
    if self.index_from:
      index = load_index(Path(self.index_from) / "index")
      if not np.array_equal(index.ids, self.corpus.ids):
        raise InputError(f"the index holds {index.num_blocks} blocks that are not the corpus "
                         f"{self.corpus_task!r} ({len(self.corpus.ids)} blocks)",
                         path=Path(self.index_from) / "index", field="ids")
      return index
    if (self.index_path / "manifest.json").exists():
      return load_index(self.index_path)
    if params is None:
      raise ValueError("OpenQAPipeline needs warm-start parameters to build its index")
    embeddings = self.towers.embed_docs(params, self.corpus.doc_inputs)
    index = self.index_factory()
    index.build(embeddings, self.corpus.ids, manifest={"embedder_step": "warm_start"})
    index.save(self.index_path)
    return index

  def examples(self, split: str) -> list[dict]:
    return task_examples(self.qa_task, split)

  def stream(self, *, batch_size, seed):
    return example_stream(self.examples("train"), batch_size=batch_size, seed=seed)

  def retrieve_ids(self, params, query_ids, k) -> np.ndarray:
    if self.index is None:
      return np.full((query_ids.shape[0], 1), -1, np.int64)
    q = self.towers.embed_queries(params, query_ids, batch_size=query_ids.shape[0])
    return self.index.search(q, k)[1]

  def batch(self, params, raw, *, with_gold: bool) -> dict:
    query_ids = features.pad_rows([e["inputs"] for e in raw], self.query_len)
    k = self.num_retrieved if with_gold else self.num_read
    retrieved = self.retrieve_ids(params, query_ids, k)
    embeddings = (self.index.embeddings if self.index is not None
                  else np.zeros((len(self.corpus.ids), self.proj_dim), np.float32))
    batch = features.qa_batch(raw, retrieved, embeddings, self.corpus, self.specials,
                              self.matcher, query_len=self.query_len,
                              num_read=min(self.num_read, retrieved.shape[1]),
                              max_span_len=self.max_span_len, with_gold=with_gold)
    batch["_retrieved_ids"] = retrieved
    return batch

  def prepare(self, step, params, raw):
    batch = self.batch(params, raw, with_gold=True)
    del batch["_retrieved_ids"]
    return batch

  def shape_batch(self, raw):
    k = self.num_retrieved if self.index is not None else 1
    retrieved = np.resize(self.corpus.ids, (len(raw), min(k, len(self.corpus.ids))))
    if self.index is None:
      retrieved[:] = -1
    return features.qa_batch(raw, retrieved, np.zeros((len(self.corpus.ids), self.proj_dim),
                                                      np.float32),
                             self.corpus, self.specials, self.matcher, query_len=self.query_len,
                             num_read=min(self.num_read, retrieved.shape[1]),
                             max_span_len=self.max_span_len)

  def summary(self):
    return {"index": None if self.index is None else dict(self.index.manifest)}
