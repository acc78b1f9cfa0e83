"""Keeping the MIPS index fresh while the retriever trains, and measuring how stale it is.

Where the refresh is decided: `refresh_due` is the one rule (a refresh is due once
`refresh_every_steps` updates have passed since the last one started), `Refresher` is what
both modes implement, and `IndexRefreshHook` is how the training loop runs it: before every
step (a t5x-style action, see `iteration.StepHook`), never as a side effect of making a batch.

- `SyncRefresher` (this module, the default): the trainer itself re-embeds the corpus and
  rebuilds the index between steps, so runs are deterministic.
- `AsyncRefresher` (`async_refresh.py`, the paper's system): a builder process beside the
  trainer builds versions from exported document towers while training goes on.

Both write the same layout: each version is a folder `index/v{step:08d}` with its manifest
(embedder step, block count, checksum, build time); a `LATEST` file naming the newest version is
replaced atomically. Staleness of a step is `train_step - index.manifest["embedder_step"]`, the
number of updates the retriever has made since the index it searches was embedded.

Across processes (`jax.process_count() > 1`) a version is built by one builder per host: each
process embeds only its contiguous block of the corpus (`sharded_index.build_sharded`), writes
it as `index/v{step:08d}/shard_{process:05d}/`, and process 0 marks the version whole with its
manifest (kind "sharded") once every shard is written; searches merge every process's top k
(`ShardedIndex`, a collective: under `train(process_rows="prepared")` every process prepares
the whole global batch, so all search with the same queries). A resumed run reloads its own
shard of the version its checkpoint names, and rebuilds the version (from the restored
parameters, which are the ones it was built from) when it is not whole; so a resumed
multi-process run continues exactly. One process alone takes the one-process path unchanged.
"""
from __future__ import annotations

import abc
import dataclasses
import shutil
import time
from pathlib import Path
from typing import Callable

import gin
import numpy as np

from realm_bench import distributed
from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text
from realm_bench.iteration import StepHook
from realm_bench.retrieval.embed import build_index
from realm_bench.retrieval.index import ExactIndex, MipsIndex, load_index
from realm_bench.retrieval.sharded_index import ShardedIndex, build_sharded, shard_name

LATEST = "LATEST"


@gin.configurable
@dataclasses.dataclass
class RefreshConfig:
  refresh_every_steps: int = 500   # the paper refreshes about every 500 pre-training steps
  keep: int = 2                    # index versions kept on disk
  embed_batch_size: int = 256
  # 'sync': the trainer rebuilds the index itself every refresh_every_steps (deterministic).
  # 'async': a builder process beside the trainer does, from the document-tower parameters
  # the trainer exports every refresh_every_steps (the paper's system).
  mode: str = "sync"
  poll_seconds: float = 0.2        # async: how often the builder and the trainer look for news
  max_builder_restarts: int = 10   # async: then the run goes on with its last index

  def __post_init__(self):
    if self.mode not in ("sync", "async"):
      raise InputError(f"refresh mode must be 'sync' or 'async', got {self.mode!r}",
                       field="RefreshConfig.mode")
    if self.refresh_every_steps < 1 or self.keep < 1:
      raise InputError("refresh_every_steps and keep must be at least 1",
                       field="RefreshConfig")


def refresh_due(step: int, last_refresh_step: int | None, every: int) -> bool:
  """The refresh rule of both modes: at the first step, then once `every` updates have passed
  since the last refresh started (sync: the index's embedder step; async: the last export)."""
  return last_refresh_step is None or step - last_refresh_step >= every


def version_name(step: int) -> str:
  return f"v{step:08d}"


def write_version(index: MipsIndex, index_root, step: int) -> Path:
  """Saves `index` as the version of `step` (temporary name, then renamed), then points LATEST
  at it: a reader sees the old version or the new one, never half of one."""
  path = index.save(Path(index_root) / version_name(step))
  atomic_write_text(Path(index_root) / LATEST, path.name + "\n")
  return path


def prune_versions(index_root, keep: int, protected=()) -> None:
  """Removes all but the `keep` newest versions, sparing the names in `protected`."""
  versions = sorted(p for p in Path(index_root).glob("v*") if p.is_dir())
  for old in versions[:-max(keep, 1)]:
    if old.name not in protected:
      shutil.rmtree(old, ignore_errors=True)


def version_step(path) -> int | None:
  """The embedder step a version folder is named after (`v00000050` -> 50), else None."""
  name = Path(path).name
  return int(name[1:]) if name.startswith("v") and name[1:].isdigit() else None


def discard_versions_after(index_root, step: int) -> list[str]:
  """Removes the versions embedded after `step` and points LATEST at the newest one left.

  A run killed at step 60 and resumed from its checkpoint of step 50 replays steps 51-60 with
  the parameters of step 50; an index embedded from the killed run's step 60 comes from
  parameters that will never exist (searching it would log a negative staleness). Returns the
  names removed.
  """
  index_root = Path(index_root)
  removed = []
  for path in sorted(index_root.glob("v*")):
    embedded = version_step(path)
    if path.is_dir() and embedded is not None and embedded > step:
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path.name)
  if removed:
    left = [p for p in sorted(index_root.glob("v*"))
            if p.is_dir() and version_step(p) is not None]
    pointer = index_root / LATEST
    if left:
      atomic_write_text(pointer, left[-1].name + "\n")
    else:
      pointer.unlink(missing_ok=True)
  return removed


def duration_stats(durations) -> dict:
  """What a run record says of its refreshes (both modes)."""
  return {"num_refreshes": len(durations),
          "refresh_seconds_mean": float(np.mean(durations or [0.0])),
          "refresh_seconds_max": float(np.max(durations or [0.0]))}


def latest_version(index_root) -> Path | None:
  pointer = Path(index_root) / LATEST
  if not pointer.exists():
    return None
  path = Path(index_root) / pointer.read_text().strip()
  return path if path.exists() else None


class Refresher(abc.ABC):
  """An index that is rebuilt as training goes; both modes share the rule and the bookkeeping.

  `index` is the version searched now; `maybe_refresh(step, params)` runs between steps;
  `protect()` keeps the current version on disk until the next checkpoint, so a resume
  reloads exactly the index its checkpoint was using (`restore`).
  """

  def __init__(self, config: RefreshConfig):
    self.config = config
    self.index: MipsIndex | None = None
    self.version_path: Path | None = None
    self.protected: str | None = None
    self.last_refresh_step: int | None = None
    self.durations: list[float] = []

  @property
  def embedder_step(self) -> int:
    return int(self.index.manifest["embedder_step"])

  def staleness(self, step: int) -> int:
    return step - self.embedder_step

  def due(self, step: int) -> bool:
    return refresh_due(step, self.last_refresh_step, self.config.refresh_every_steps)

  @abc.abstractmethod
  def maybe_refresh(self, step: int, params) -> bool:
    """Refreshes when due; returns whether a new index was swapped in."""

  @abc.abstractmethod
  def restore(self, version: str | None, params, step: int) -> None:
    """Reloads the index a checkpoint was using (or makes one at `step` if it is gone)."""

  def protect(self) -> None:
    self.protected = self.version_path.name

  def stats(self) -> dict:
    return duration_stats(self.durations)

  def close(self) -> None:
    pass


class SyncRefresher(Refresher):
  """Rebuilds the index every `refresh_every_steps` steps, between training steps.

  `embed_docs(params, ids [b, L]) -> [b, D]` embeds one batch of `embed_batch_size` rows.
  `shard` (default: this process of this run) chooses the one-builder-per-host path when it is
  one of several (see the module docstring).
  """

  def __init__(self, *, doc_inputs: np.ndarray, doc_ids: np.ndarray,
               embed_docs: Callable[[object, np.ndarray], np.ndarray], index_root,
               config: RefreshConfig, index_factory: Callable[[], MipsIndex] = ExactIndex,
               shard: distributed.DataShard | None = None):
    super().__init__(config)
    self.doc_inputs = doc_inputs
    self.doc_ids = doc_ids
    self.embed_docs = embed_docs
    self.index_root = Path(index_root)
    self.index_factory = index_factory
    self.shard = distributed.DataShard.of_this_process() if shard is None else shard

  @property
  def sharded(self) -> bool:
    return self.shard.num_shards > 1

  def maybe_refresh(self, step: int, params) -> bool:
    if not self.due(step):
      return False
    self.refresh(step, params)
    return True

  def refresh(self, step: int, params) -> MipsIndex:
    if self.sharded:
      return self._refresh_sharded(step, params)
    index = build_index(
        embed_fn=lambda ids: self.embed_docs(params, ids), index_factory=self.index_factory,
        manifest={"embedder_step": int(step)}, doc_inputs=self.doc_inputs, ids=self.doc_ids,
        batch_size=self.config.embed_batch_size)
    start = time.perf_counter()
    path = write_version(index, self.index_root, step)
    self.durations.append(index.manifest["build_seconds"] + time.perf_counter() - start)
    self._use(index, path)
    prune_versions(self.index_root, self.config.keep, {self.protected})
    return index

  def _use(self, index: MipsIndex, path: Path) -> None:
    self.index, self.version_path = index, path
    self.last_refresh_step = self.embedder_step

  def _refresh_sharded(self, step: int, params) -> ShardedIndex:
    """This host's shard of the version of `step`; process 0 writes LATEST and prunes once
    every shard is saved (`ShardedIndex.save` ends in a barrier before its manifest)."""
    local_params = distributed.host_local(params)   # this host's rows: not an SPMD program
    index = build_sharded(
        embed_fn=lambda ids: self.embed_docs(local_params, ids), doc_inputs=self.doc_inputs,
        ids=self.doc_ids, index_factory=self.index_factory,
        manifest={"embedder_step": int(step)}, batch_size=self.config.embed_batch_size,
        shard=self.shard)
    start = time.perf_counter()
    path = index.save(self.index_root / version_name(step), process=self.shard.index)
    if self.shard.index == 0:
      atomic_write_text(self.index_root / LATEST, path.name + "\n")
    self.durations.append(index.manifest["build_seconds"] + time.perf_counter() - start)
    self._use(index, path)
    if self.shard.index == 0:   # the others never read an older version again
      prune_versions(self.index_root, self.config.keep, {self.protected})
    return index

  def restore(self, version, params, step):
    if self.sharded:
      self._restore_sharded(version, params, step)
      return
    discard_versions_after(self.index_root, step)
    path = self.index_root / version if version else None
    if path is not None and (path / "manifest.json").exists():
      self._use(load_index(path), path)
    else:
      self.refresh(step, params)

  def _restore_sharded(self, version, params, step) -> None:
    if self.shard.index == 0:
      discard_versions_after(self.index_root, step)
    distributed.barrier("sync-refresh-restore")
    path = self.index_root / version if version else None
    mine = path is not None and (path / "manifest.json").exists() and (
        path / shard_name(self.shard.index) / "manifest.json").exists()
    # Load only if every process can: one that rebuilt while another loaded would deadlock
    # in the rebuild's collectives.
    if distributed.allgather(np.int64(mine)).all():
      self._use(ShardedIndex.load_shard(path, process=self.shard.index,
                                        processes=self.shard.num_shards), path)
    else:
      self.refresh(step, params)


class IndexRefreshHook(StepHook):
  """Runs a Refresher before every step and logs each step's staleness.

  Host metrics per step: `staleness` and `index_embedder_step`; its checkpoint state names the
  index version in use (protected from pruning) and the running staleness statistics.
  """
  name = "index_refresh"

  def __init__(self, refresher: Refresher):
    self.refresher = refresher
    self.staleness = {"count": 0, "sum": 0, "max": 0}

  def before_step(self, step, params):
    self.refresher.maybe_refresh(step, params)
    staleness = self.refresher.staleness(step)
    self.staleness["count"] += 1
    self.staleness["sum"] += staleness
    self.staleness["max"] = max(self.staleness["max"], staleness)
    return {"staleness": staleness, "index_embedder_step": self.refresher.embedder_step}

  def state(self):
    self.refresher.protect()
    return {"index_version": self.refresher.version_path.name,
            "staleness": dict(self.staleness)}

  def restore(self, state, params, step):
    self.refresher.restore(state.get("index_version"), params, step)
    self.staleness = dict(state["staleness"])

  def summary(self):
    s = self.staleness
    return {**self.refresher.stats(),
            "staleness_mean": s["sum"] / max(s["count"], 1),
            "staleness_max": s["max"],
            "refresh_every_steps": self.refresher.config.refresh_every_steps,
            "index_manifests": [dict(self.refresher.index.manifest)]}
