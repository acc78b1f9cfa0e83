"""Keeping the MIPS index fresh while the retriever trains, and measuring how stale it is.

Each refresh embeds the whole corpus with the current document tower, builds an index and
writes it to a new versioned folder `index/v{step:08d}` with its manifest (embedder step, block
count, checksum, build time); a `LATEST` file naming the newest version is replaced atomically.
This is the synchronous mode (refresh every N steps inside the trainer), which makes runs
deterministic; the asynchronous builder process (`builder.py`, `RefreshConfig.mode = 'async'`)
writes the same layout.

Staleness of a step is `train_step - index.manifest["embedder_step"]`: the number of updates
the retriever has made since the index it searches was embedded.
"""
from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Callable

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text
from realm_bench.retrieval.index import ExactIndex, MipsIndex, load_index

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


class SyncRefresher:
  """Rebuilds the index every `refresh_every_steps` steps, between training steps."""

  def __init__(self, *, doc_inputs: np.ndarray, doc_ids: np.ndarray,
               embed_docs: Callable[[object, np.ndarray], np.ndarray], index_root,
               config: RefreshConfig, index_factory: Callable[[], MipsIndex] = ExactIndex):
    self.doc_inputs = doc_inputs
    self.doc_ids = doc_ids
    self.embed_docs = embed_docs
    self.index_root = Path(index_root)
    self.config = config
    self.index_factory = index_factory
    self.index: MipsIndex | None = None
    self.version_path: Path | None = None
    self.durations: list[float] = []
    self.protected: str | None = None

  @property
  def embedder_step(self) -> int:
    return int(self.index.manifest["embedder_step"])

  def staleness(self, step: int) -> int:
    return step - self.embedder_step

  def due(self, step: int) -> bool:
    return self.index is None or self.staleness(step) >= self.config.refresh_every_steps

  def maybe_refresh(self, step: int, params) -> bool:
    if not self.due(step):
      return False
    self.refresh(step, params)
    return True

  def refresh(self, step: int, params) -> MipsIndex:
    start = time.perf_counter()
    embeddings = self.embed_docs(params, self.doc_inputs)
    index = self.index_factory()
    index.build(embeddings, self.doc_ids, manifest={"embedder_step": int(step)})
    index.manifest["build_seconds"] = round(time.perf_counter() - start, 4)
    path = write_version(index, self.index_root, step)
    self.durations.append(time.perf_counter() - start)
    self.index, self.version_path = index, path
    prune_versions(self.index_root, self.config.keep, {self.protected})
    return index

  def restore(self, version: str | None, params, step: int) -> None:
    """Reloads the index a checkpoint was using; rebuilds at `step` if it has been pruned."""
    path = self.index_root / version if version else None
    if path is not None and (path / "manifest.json").exists():
      self.index = load_index(path)
      self.version_path = path
    else:
      self.refresh(step, params)

  def protect(self) -> None:
    """Keeps the current version until the next checkpoint: a resume reloads exactly it."""
    self.protected = self.version_path.name

  def stats(self) -> dict:
    return duration_stats(self.durations)

  def close(self) -> None:
    pass
