"""The asynchronous index refresh of a multi-process run: one builder per host, agreed versions.

The layout is one builder per host, each embedding only its host's block of the corpus
(`distributed.row_range`) from the same export, rather than the paper's one builder job of its
own: it is the same supervised subprocess as on one host
(no second kind of job to schedule, place or restart), the embedding divides by the hosts, and
a host's shard is written and read by that host only, so no index crosses the network. The
price is that the hosts finish a version at different times; the processes therefore agree
before every step on the version to search (the newest one every process has loaded, found by
an all-gather of a few integers), so no process searches a version another lacks.
"""
from __future__ import annotations

import sys
import threading
from pathlib import Path

import numpy as np

from realm_bench import distributed
from realm_bench.errors import InputError
from realm_bench.retrieval.async_refresh import (AsyncRefresher, _rmtree, discard_exports_after,
                                                 export_embedder, exports, newest_shard_version,
                                                 remove_unfinished_work, shard_pointer,
                                                 write_corpus)
from realm_bench.retrieval.index import MipsIndex, load_index
from realm_bench.retrieval.refresh import discard_versions_after, version_step
from realm_bench.retrieval.sharded_index import ShardedIndex, shard_name


def agreed_version(reports: np.ndarray) -> int | None:
  """The newest step in every row of `reports` [processes, n] (each process's loaded versions,
  padded with -1): the version all can search. None when they hold none in common."""
  common = set(np.asarray(reports)[0].tolist())
  for row in np.asarray(reports)[1:]:
    common &= set(row.tolist())
  common.discard(-1)
  return max(common) if common else None


class ShardedAsyncRefresher(AsyncRefresher):
  """The asynchronous refresh of a multi-process run: one builder per host, agreed versions.

  Each trainer process supervises its own builder, which embeds only that host's `row_range`
  of the corpus from the same document-tower export (process 0 writes the exports; the run
  folder is shared, as for orbax's checkpoints) into `vNNNNNNNN/shard_IIIII/`. The builders
  finish a version at different times, so between steps the processes agree on the version to
  search: each reports the versions it has loaded (all-gathered, a few integers), and all swap
  to the newest version every process holds, never to one another process lacks. A process
  that loaded v6 while another still has only v4 keeps searching the current version until
  both hold a common newer one; `_wait_for` (first index, resume) repeats the agreement until
  the common version is recent enough. Process 0 alone removes files others may read, and
  only versions older than the agreed one, which every builder has moved past.
  """

  # How many loaded versions each process reports (the newest ones): ample, as the builders
  # build the newest export and the loaders drop versions once one newer is agreed.
  REPORTED = 8

  def __init__(self, *, shard: distributed.DataShard, **kwargs):
    super().__init__(**kwargs)
    self.shard = shard
    self._spawn_kwargs["shard"] = (shard.index, shard.num_shards)
    self._ready: dict[int, tuple[MipsIndex, Path]] = {}   # loaded local shards, by step
    self.agreements = 0                                    # swaps agreed by all processes

  @property
  def primary(self) -> bool:
    return self.shard.index == 0

  def start(self) -> None:
    """Process 0 writes the corpus; the builders start at the first step (`_launch`), which
    every process reaches together, so none starts before a killed run's leftovers are gone."""
    self.index_root.mkdir(parents=True, exist_ok=True)
    self.export_dir.mkdir(parents=True, exist_ok=True)
    remove_unfinished_work(self.index_root, self.shard.index)
    if self.primary:
      write_corpus(self.index_root, *self._corpus)
    distributed.barrier("async-refresh-corpus")

  def _launch(self, step: int | None) -> None:
    if self._loader is not None:
      return
    if self.primary and step is not None:
      versions = discard_versions_after(self.index_root, step)
      for i in range(self.shard.num_shards):   # shard pointers naming a discarded version
        path = newest_shard_version(self.index_root, i)
        pointer = shard_pointer(self.index_root, i)
        if pointer.exists() and (path is None or version_step(path) > step):
          pointer.unlink()
      steps = discard_exports_after(self.export_dir, step)
      if versions or steps:
        print(f"resuming at step {step}: discarded what the interrupted run made after it "
              f"(index versions {versions or 'none'}, document-tower exports of steps "
              f"{steps or 'none'})", file=sys.stderr)
    distributed.barrier("async-refresh-launch")
    self._start_process()
    self._loader = threading.Thread(target=self._watch, name="index-loader", daemon=True)
    self._loader.start()

  def _watch(self) -> None:
    seen = None
    while not self._stop.wait(self.config.poll_seconds):
      path = newest_shard_version(self.index_root, self.shard.index)
      if path is None or path.name == seen:
        continue
      try:
        index = load_index(path / shard_name(self.shard.index))
      except (OSError, ValueError, InputError) as e:   # pruned meanwhile: next poll
        print(f"index loader: could not read {path}: {e}", file=sys.stderr)
        continue
      with self._lock:
        self._ready[int(index.manifest["embedder_step"])] = (index, path)
      seen = path.name

  def _agreed(self) -> int | None:
    """The newest version every process has loaded (a collective), None if there is none."""
    with self._lock:
      steps = sorted(self._ready)
    if self.index is not None:
      steps.append(self.embedder_step)
    mine = np.full(self.REPORTED, -1, np.int64)
    newest = sorted(set(steps))[-self.REPORTED:]
    mine[:len(newest)] = newest
    return agreed_version(distributed.allgather(mine))

  def _ready_step(self) -> int | None:
    return self._agreed()   # a collective: `_wait_for` runs on every process at once

  def _swap(self) -> bool:
    agreed = self._agreed()
    if agreed is None or (self.index is not None and agreed <= self.embedder_step):
      return False
    with self._lock:
      local, path = self._ready[agreed]
      for old in [s for s in self._ready if s <= agreed]:
        del self._ready[old]
    self.index, self.version_path = ShardedIndex.wrap(local, row_range=local.manifest.get(
        "row_range")), path
    self.agreements += 1
    self.durations.append(float(local.manifest.get("build_seconds", 0.0)))
    if self.primary:
      self._prune(agreed)
    return True

  def _prune(self, agreed: int) -> None:
    """Versions and exports older than the agreed one, which every builder has built past."""
    older = sorted(p for p in self.index_root.glob("v*")
                   if p.is_dir() and (version_step(p) or 0) < agreed)
    spared = {self.protected, self.version_path.name}
    for old in older[:max(len(older) - (self.config.keep - 1), 0)]:
      if old.name not in spared:
        _rmtree(old)
    for export_step, path in exports(self.export_dir):
      if export_step < agreed:
        path.unlink(missing_ok=True)

  def _export(self, step: int, params) -> None:
    retriever = distributed.host_local(params["retriever"])   # a collective where sharded
    if self.primary:
      export_embedder(self.export_dir, step, retriever)
    self.last_refresh_step = step

  def _reload(self, path: Path | None) -> bool:
    """This host's shard of the checkpoint's version, if every host still has its own (a
    collective: else all of them wait for the version the builders make again)."""
    mine = path is not None and (path / shard_name(self.shard.index) / "manifest.json").exists()
    if not distributed.allgather(np.int64(mine)).all():
      return False
    local = load_index(path / shard_name(self.shard.index))
    self.index = ShardedIndex.wrap(local, row_range=local.manifest.get("row_range"))
    self.version_path = path
    self.last_refresh_step = self.embedder_step
    return True

  def stats(self) -> dict:
    return {**super().stats(), "builders": self.shard.num_shards,
            "agreed_swaps": self.agreements}
