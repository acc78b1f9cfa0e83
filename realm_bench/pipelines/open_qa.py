"""ORQA fine-tuning and Open-QA prediction: questions + MIPS over a frozen index (OPEN_QA_BATCH)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.pipelines import base, batching, token_file
from realm_bench.retrieval.embed import Towers, build_index
from realm_bench.retrieval.index import ExactIndex, MipsIndex, check_corpus, load_index
from realm_bench.tasks.metrics import to_text
from realm_bench.tasks.open_qa import answers_are_regex, spec_of


@gin.configurable
@dataclasses.dataclass
class OpenQAPipeline(base.Pipeline):
  """The index is built once, from the warm-start document tower, and frozen.

  `retriever` "bm25" reads BM25's blocks instead (Lee et al.'s BERT-baseline row: the same
  reader and fine-tuning over word-overlap retrieval; the retriever then gets no gradient and
  adds nothing to the span scores). `retrieve=False` reads only the null document.
  `index_from` reads an index built by `realm-bench index` (the paper-scale path: the corpus
  is embedded once, in shards, instead of in memory here). Whether answers are regular
  expressions (CuratedTREC) follows from `qa_task`.
  """
  qa_task: str = "realm_bench.synthetic.nq_open"
  corpus_task: str = "realm_bench.synthetic.corpus"
  num_retrieved: int = 5000     # the retriever's marginal (ORQA: top 5000)
  num_read: int = 5             # blocks the reader reads
  max_span_len: int = 10
  retrieve: bool = True
  retriever: str = "dense"
  index_factory: Callable[[], MipsIndex] = ExactIndex
  index_from: str | None = None

  @property
  def regex_answers(self) -> bool:
    return answers_are_regex(self.qa_task)

  @property
  def task_name(self):
    return self.qa_task

  @property
  def dataset(self):
    return spec_of(self.qa_task).dataset

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    if self.retriever not in ("dense", "bm25"):
      raise InputError(f"expected 'dense' or 'bm25', got {self.retriever!r}",
                       field="OpenQAPipeline.retriever")
    for task in (self.qa_task, self.corpus_task):
      base.check_task_vocabulary(task, model.vocabulary)
    self.lengths = sequence_lengths
    self.corpus = token_file.for_run(self.corpus_task, sequence_lengths.block, run_dir)
    self.specials = base.specials_of(model.vocabulary)
    self.towers = Towers(model)
    self.proj_dim = model.proj_dim
    self.matcher = batching.AnswerMatcher(model.vocabulary.encode, regex=self.regex_answers)
    self.index_path = Path(run_dir) / "index" / "frozen"
    self.index = self._frozen_index(warm_start_params)

  def _frozen_index(self, params):
    if not self.retrieve:
      return None
    if self.retriever == "bm25":
      from realm_bench.retrieval.bm25 import Bm25Retriever  # pylint: disable=g-import-not-at-top
      return Bm25Retriever(zip(self.corpus.ids.tolist(), self.corpus.titles, self.corpus.bodies))
    saved = (Path(self.index_from) / "index" if self.index_from
             else self.index_path if (self.index_path / "manifest.json").exists() else None)
    if saved is not None:
      index = load_index(saved)
      check_corpus(index, self.corpus.ids, path=saved, corpus=self.corpus_task,
                   dim=self.proj_dim)
      return index
    if params is None:   # evaluate / infer of a run that is not a fine-tuning run
      raise InputError("no frozen index here: CHECKPOINT_FROM must be a fine-tuning run "
                       "(runs/finetune.gin saves its index there), or set INDEX_FROM",
                       path=self.index_path)
    return build_index(
        embed_fn=lambda ids: self.towers.embed_doc_batch(params, ids),
        index_factory=self.index_factory, manifest={"embedder_step": "warm_start"},
        doc_inputs=self.corpus.doc_inputs, ids=self.corpus.ids,
        save=lambda index: index.save(self.index_path))

  def examples(self, split: str) -> list[dict]:
    return base.task_examples(self.qa_task, split, self.lengths.for_queries())

  def stream(self, *, batch_size, seed):
    examples = self.examples("train")
    self.num_examples = len(examples)
    return base.example_stream(examples, batch_size=batch_size, seed=seed)

  @property
  def dense(self) -> bool:
    return self.index is not None and self.retriever == "dense"

  def retrieve_ids(self, params, raw, query_ids, k) -> np.ndarray:
    if self.index is None:
      return np.full((query_ids.shape[0], 1), -1, np.int64)
    if not self.dense:
      return self.index.search([to_text(e["question"]) for e in raw], k)[1]
    q = self.towers.embed_queries(params, query_ids, batch_size=query_ids.shape[0])
    return self.index.search(q, k)[1]

  def batch(self, params, raw, *, with_gold: bool) -> tuple[dict, np.ndarray]:
    """(OPEN_QA_BATCH, retrieved block ids [B, N]); prediction reads the top `num_read`."""
    query_ids = batching.pad_rows([e["inputs"] for e in raw], self.lengths.query)
    k = self.num_retrieved if with_gold else self.num_read
    retrieved = self.retrieve_ids(params, raw, query_ids, k)
    embeddings = self.index.embeddings if self.dense else self._no_embeddings()
    return self._qa_batch(raw, retrieved, embeddings, with_gold), retrieved

  def prepare(self, step, params, raw):
    del step
    return self.batch(params, raw, with_gold=True)[0]

  def shape_batch(self, raw):
    k = self.num_retrieved if self.index is not None else 1
    retrieved = np.resize(self.corpus.ids, (len(raw), min(k, len(self.corpus.ids))))
    if self.index is None:
      retrieved[:] = -1
    return self._qa_batch(raw, retrieved, self._no_embeddings(), True)

  def _no_embeddings(self) -> np.ndarray:
    """Zero document embeddings for every corpus row (BM25 or no retrieval scores nothing),
    as a read-only broadcast view: a real [N, dim] array would be 6.8 GB at paper scale."""
    return np.broadcast_to(np.zeros((1, self.proj_dim), np.float32),
                           (len(self.corpus.ids), self.proj_dim))

  def _qa_batch(self, raw, retrieved, embeddings, with_gold):
    return batching.qa_batch(raw, retrieved, embeddings, self.corpus, self.specials,
                             self.matcher, query_len=self.lengths.query,
                             num_read=min(self.num_read, retrieved.shape[1]),
                             max_span_len=self.max_span_len, with_gold=with_gold,
                             reader_len=self.lengths.reader)

  def index_manifest(self) -> dict | None:
    return None if self.index is None else dict(self.index.manifest)

  def summary(self):
    manifest = self.index_manifest()
    return {"index_manifests": [] if manifest is None else [manifest]}

  def predictions(self, model, params, examples, *, batch_size: int) -> list[dict]:
    """[{question, prediction, answers, retrieved}] for every example, in order; a prediction
    is cut out of the original block text."""
    import jax  # pylint: disable=g-import-not-at-top
    predict = jax.jit(model.predict_batch)
    rows = []
    for start in range(0, len(examples), batch_size):
      chunk = list(examples[start:start + batch_size])
      real = len(chunk)
      chunk += [chunk[-1]] * (batch_size - real)     # one compiled shape for every batch
      batch, retrieved = self.batch(params, chunk, with_gold=False)
      out = jax.device_get(predict(params, batch))
      for i in range(real):
        prediction = ""
        if out["has_span"][i]:
          read = out["block"][i]
          prediction = batching.answer_text(self.corpus, retrieved[i, read],
                                            out["start"][i], out["end"][i])
        rows.append({"question": to_text(chunk[i]["question"]), "prediction": prediction,
                     "answers": [to_text(a) for a in chunk[i]["answers"]],
                     "retrieved": [int(b) for b in retrieved[i] if b >= 0]})
    return rows
