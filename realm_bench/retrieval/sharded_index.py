"""MIPS over a corpus split across the processes of a multi-process run.

REALM embedded 13M blocks on 16 TPUs: the embeddings are the largest thing in the system
(6.8 GB at 128 dims), so beyond one host each process keeps only its rows. `ShardedIndex`
wraps any `MipsIndex` (an `ExactIndex` on the process's devices, or a `ScannIndex`: one
searcher per host) built over the process's contiguous row range (`distributed.row_range`),
and a search is the two-stage exact top-k carried one level up: every process takes the top k
of its own rows, the [processes, queries, k] candidates are all-gathered, and the top k of
those is the global top k. That is exact for exact shards by the same argument as the
in-device blocks of `ExactIndex`: any row of the global top k is in its own shard's top k.

Every process must call `search` with the same queries (it is a collective), which is what an
SPMD training step does anyway. The merge breaks score ties by process then rank, i.e. by
global row order, as single-process search does.

On disk a sharded index is a folder of one sub-folder per process, `shard_00000/`, ... (each an
ordinary saved index of that process's rows, written by that process), and a `manifest.json`
of kind "sharded" that process 0 writes once every shard is complete: the manifest is the mark
of a whole version, so a run killed while saving leaves a folder a resume rebuilds. A shard is
read back only by the process of the same index in a run of the same process count (its rows
are that process's `row_range`); that is what resuming a multi-process run needs, and the
embeddings never cross the network.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_json
from realm_bench.retrieval.index import ExactIndex, MipsIndex, load_index

# The id given to a padding candidate (a shard with fewer than k rows).
PAD_ID = -1


def merge_top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
  """The global top k from per-shard candidates [shards, Q, k_s] (best first within each).

  A stable sort over the shards' candidates laid out shard after shard, so equal scores keep
  the order of global rows (shard 0's rows precede shard 1's).
  """
  scores = np.asarray(scores, np.float32)
  ids = np.asarray(ids, np.int64)
  if scores.ndim != 3 or scores.shape != ids.shape:
    raise ValueError(f"expected [shards, queries, k] scores and ids, got {scores.shape} and "
                     f"{ids.shape}")
  shards, queries, per = scores.shape
  flat_scores = scores.transpose(1, 0, 2).reshape(queries, shards * per)
  flat_ids = ids.transpose(1, 0, 2).reshape(queries, shards * per)
  order = np.argsort(-flat_scores, axis=1, kind="stable")[:, :k]
  return np.take_along_axis(flat_scores, order, 1), np.take_along_axis(flat_ids, order, 1)


def _pad(scores, ids, k):
  short = k - scores.shape[1]
  if short <= 0:
    return scores, ids
  return (np.concatenate([scores, np.full((scores.shape[0], short), -np.inf, np.float32)], 1),
          np.concatenate([ids, np.full((ids.shape[0], short), PAD_ID, np.int64)], 1))


def _allgather(local: np.ndarray) -> np.ndarray:
  """[processes, ...]: every process's `local`, on every process."""
  from realm_bench import distributed  # pylint: disable=g-import-not-at-top
  return distributed.allgather(local)


def shard_name(process: int) -> str:
  return f"shard_{int(process):05d}"


@gin.configurable
class ShardedIndex(MipsIndex):
  """This process's rows in a local index; searches merge every process's top k."""

  kind = "sharded"

  def __init__(self, local_factory: Callable[[], MipsIndex] = ExactIndex, *,
               gather: Callable[[np.ndarray], np.ndarray] = _allgather):
    self.local = local_factory()
    self._gather = gather
    self.manifest = {}

  @property
  def ids(self):
    return self.local.ids

  @property
  def embeddings(self):
    return self.local.embeddings

  @classmethod
  def wrap(cls, local: MipsIndex, *, row_range=None,
           gather: Callable[[np.ndarray], np.ndarray] = _allgather) -> "ShardedIndex":
    """The sharded index over `local`, this process's already built (or loaded) shard; a
    collective (the processes exchange their row counts)."""
    sharded = cls.__new__(cls)
    sharded.local, sharded._gather = local, gather   # pylint: disable=protected-access
    sharded._describe(row_range)   # pylint: disable=protected-access
    return sharded

  def _describe(self, row_range=None) -> None:
    rows = self._gather(np.asarray([self.local.num_blocks], np.int64))
    self.manifest = {**self.local.manifest, "sharded_over": int(rows.shape[0]),
                     "global_num_blocks": int(rows.sum())}
    if row_range is not None:
      self.manifest["row_range"] = [int(row_range[0]), int(row_range[1])]

  def build(self, embeddings, ids, *, manifest=None):
    """`embeddings`/`ids`: this process's rows only."""
    self.local.build(embeddings, ids, manifest=manifest)
    self._describe()

  def save(self, path, *, process: int | None = None) -> Path:
    """Writes this process's shard into `path`; process 0 then marks the version whole with
    the manifest, after a barrier (a collective: every process calls it)."""
    from realm_bench import distributed  # pylint: disable=g-import-not-at-top
    path = Path(path)
    process = distributed.process_index() if process is None else process
    self.local.save(path / shard_name(process))
    distributed.barrier(f"sharded-index-save:{path.name}")
    if process == 0:
      atomic_write_json(path / "manifest.json", {
          **{k: v for k, v in self.manifest.items() if k not in ("row_range", "checksum")},
          "kind": self.kind, "shard_kind": self.local.kind,
          "num_blocks": self.manifest["global_num_blocks"],
          "shards": [shard_name(i) for i in range(self.manifest["sharded_over"])]})
    return path

  @classmethod
  def load_shard(cls, path, *, process: int, processes: int,
                 gather: Callable[[np.ndarray], np.ndarray] = _allgather) -> "ShardedIndex":
    """This process's shard of the whole sharded version in `path` (a collective). Raises
    InputError when the version is not whole or was written by another process count."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
      raise InputError("not a whole sharded index (no manifest: its save was interrupted)",
                       path=path)
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    if manifest.get("kind") != cls.kind or manifest.get("sharded_over") != processes:
      raise InputError(f"a {manifest.get('kind')!r} index over {manifest.get('sharded_over')} "
                       f"processes; this run has {processes}", path=manifest_path,
                       field="sharded_over")
    local = load_index(path / shard_name(process))
    return cls.wrap(local, row_range=local.manifest.get("row_range"), gather=gather)

  def search(self, queries, k):
    k = int(k)
    scores, ids = self.local.search(queries, min(k, self.local.num_blocks))
    scores, ids = _pad(np.asarray(scores, np.float32), np.asarray(ids, np.int64), k)
    merged_scores, merged_ids = merge_top_k(self._gather(scores), self._gather(ids), k)
    total = self.manifest.get("global_num_blocks", k)
    return merged_scores[:, :min(k, total)], merged_ids[:, :min(k, total)]


@gin.configurable
class DistributedExactIndex(ShardedIndex):
  """`ShardedIndex` of `ExactIndex`es: exact search over the whole, split, corpus."""

  def __init__(self, *, query_batch: int = 1024, top_k_block: int = 1024):
    super().__init__(lambda: ExactIndex(query_batch=query_batch, top_k_block=top_k_block))


def build_sharded(*, embed_fn: Callable[[np.ndarray], np.ndarray], doc_inputs: np.ndarray,
                  ids: np.ndarray, index_factory: Callable[[], MipsIndex] = ExactIndex,
                  manifest: dict | None = None, batch_size: int = 256,
                  shard=None) -> ShardedIndex:
  """Embeds this process's contiguous block of the corpus and indexes it (one builder per
  host): every process passes the whole corpus's `doc_inputs`/`ids` (a memmap reads only the
  rows it touches) and embeds `distributed.row_range` of it, so the corpus is embedded once
  across the run, `processes` times faster than by one."""
  from realm_bench import distributed  # pylint: disable=g-import-not-at-top
  from realm_bench.retrieval.embed import build_index  # pylint: disable=g-import-not-at-top
  shard = distributed.DataShard.of_this_process() if shard is None else shard
  start, stop = distributed.row_range(len(ids), shard)
  local = build_index(
      embed_fn=embed_fn, index_factory=index_factory,
      manifest={**(manifest or {}), "row_range": [start, stop]}, batch_size=batch_size,
      doc_inputs=doc_inputs[start:stop], ids=np.asarray(ids[start:stop]))
  return ShardedIndex.wrap(local, row_range=(start, stop))
