"""REALM pre-training: masked sentences, MIPS over a refreshed index (REALM_BATCH).

The index refresh is not decided here: `retrieval/refresh.py` holds the rule and the
`IndexRefreshHook` the training loop runs before each step; `prepare` only searches whatever
index the refresher holds, with the current query tower.

In a multi-process run every process sets up the same pipeline: process 0 tokenises the corpus
into the shared run folder first (the others then read its files), and the refresher is the
one-builder-per-host kind (`refresh.SyncRefresher`'s sharded path, `ShardedAsyncRefresher`),
whose searches are collective: `prepare` must run on every process with the whole global
batch, which `train(process_rows="prepared")` does.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

import gin
import numpy as np

from realm_bench import distributed
from realm_bench.iteration import HOST_METRICS_KEY
from realm_bench.pipelines import base, batching, token_file
from realm_bench.retrieval.async_refresh import AsyncRefresher
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex, MipsIndex
from realm_bench.retrieval.refresh import IndexRefreshHook, RefreshConfig, SyncRefresher
from realm_bench.retrieval.sharded_async_refresh import ShardedAsyncRefresher


@gin.configurable
@dataclasses.dataclass
class RealmPipeline(base.Pipeline):
  """Retrieve K-1 blocks per masked sentence and put the null block first.

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

  def setup(self, *, model, run_dir, sequence_lengths, warm_start_params=None):
    del warm_start_params
    for task in (self.pretrain_task, self.corpus_task):
      base.check_task_vocabulary(task, model.vocabulary)
    self.lengths = sequence_lengths
    shard = distributed.DataShard.of_this_process()
    # Candidates are read by row from memory-mapped token files under the run, written once:
    # the tokenised corpus is 15 GB at paper scale (pipelines/token_file.py).
    self.corpus = token_file.for_run(self.corpus_task, sequence_lengths.block, run_dir)
    self.examples = base.task_examples(self.pretrain_task, "train",
                                       sequence_lengths.for_queries())
    self.specials = base.specials_of(model.vocabulary)
    self.towers = Towers(model)
    if self.refresh.mode == "async":
      kwargs = dict(
          run_dir=run_dir, config=self.refresh, model=model, doc_ids=self.corpus.ids,
          doc_inputs=self.corpus.doc_inputs, index_prototype=self.index_factory(),
          config_text=gin.config_str())
      refresher = (AsyncRefresher(**kwargs) if shard.num_shards == 1
                   else ShardedAsyncRefresher(shard=shard, **kwargs))
      refresher.start()
    else:
      refresher = SyncRefresher(
          doc_inputs=self.corpus.doc_inputs, doc_ids=self.corpus.ids,
          embed_docs=self.towers.embed_doc_batch, index_root=Path(run_dir) / "index",
          config=self.refresh, index_factory=self.index_factory, shard=shard)
    self.refresh_hook = IndexRefreshHook(refresher)

  @property
  def refresher(self):
    return self.refresh_hook.refresher

  @property
  def task_name(self):
    return self.pretrain_task

  def stream(self, *, batch_size, seed):
    self.num_examples = len(self.examples)
    return base.example_stream(self.examples, batch_size=batch_size, seed=seed)

  def hooks(self):
    return [self.refresh_hook]

  def prepare(self, step, params, raw):
    del step
    query_ids = batching.pad_rows([e["inputs"] for e in raw], self.lengths.query)
    q = self.towers.embed_queries(params, query_ids, batch_size=len(raw))
    extra = 1 if self.exclude_source_block else 0
    _, retrieved = self.refresher.index.search(q, self.num_candidates - 1 + extra)
    exclude = (np.array([e["block_id"] for e in raw]) if self.exclude_source_block
               else np.full(len(raw), -2))
    cands = batching.select_candidates(retrieved, exclude, self.num_candidates - 1)
    batch = self._batch(raw, cands)
    if not self.exclude_source_block:
      # How often the block a sentence restates is among its candidates: the chance the
      # reader has to use retrieval, and what the retriever's gradient can reward. The model
      # logs the prior and posterior mass on it (`source_prior`, `source_posterior`).
      source = np.array([e["block_id"] for e in raw])
      is_source = (cands == source[:, None]) & (source[:, None] >= 0)
      batch["cand_is_source"] = np.pad(is_source, ((0, 0), (1, 0))).astype(np.float32)
      found = is_source.any(axis=1)[source >= 0]
      if found.size:
        batch[HOST_METRICS_KEY] = {"source_block_retrieved": float(np.mean(found))}
    return batch

  def shape_batch(self, raw):
    return self._batch(raw, np.resize(self.corpus.ids, (len(raw), self.num_candidates - 1)))

  def _batch(self, raw, candidate_ids):
    return batching.pretrain_batch(raw, candidate_ids, self.corpus, self.specials,
                                   query_len=self.lengths.query, max_masks=self.max_masks,
                                   joint_len=self.lengths.reader)

  def summary(self):
    stats = self.refresh_hook.summary()
    return {"params": {"refresh_every_steps": stats.pop("refresh_every_steps")},
            "index_manifests": stats.pop("index_manifests"), "stats": stats}

  def close(self):
    if getattr(self, "refresh_hook", None) is not None:
      self.refresher.close()
