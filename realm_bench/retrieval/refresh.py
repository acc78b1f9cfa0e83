"""Keeping the MIPS index fresh while the retriever trains, and measuring how stale it is.

Each refresh embeds the whole corpus with the current document tower, builds an index and
writes it to a new versioned folder `index/v{step:08d}` with its manifest (embedder step, block
count, checksum, build time); a `LATEST` file naming the newest version is replaced atomically.
This is the synchronous mode (refresh every N steps inside the trainer), which makes runs
deterministic; an asynchronous builder process writes the same layout.

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

from realm_bench.io_utils import atomic_write_text
from realm_bench.retrieval.index import ExactIndex, MipsIndex

LATEST = "LATEST"


@gin.configurable
@dataclasses.dataclass
class RefreshConfig:
  refresh_every_steps: int = 500   # the paper refreshes about every 500 pre-training steps
  keep: int = 2                    # index versions kept on disk
  embed_batch_size: int = 256


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
    path = index.save(self.index_root / f"v{step:08d}")
    atomic_write_text(self.index_root / LATEST, path.name + "\n")
    self.durations.append(time.perf_counter() - start)
    self.index, self.version_path = index, path
    self._prune()
    return index

  def restore(self, version: str | None, params, step: int) -> None:
    """Reloads the index a checkpoint was using; rebuilds at `step` if it has been pruned."""
    path = self.index_root / version if version else None
    if path is not None and (path / "manifest.json").exists():
      self.index = type(self.index_factory()).load(path)
      self.version_path = path
    else:
      self.refresh(step, params)

  def protect(self) -> None:
    """Keeps the current version until the next checkpoint: a resume reloads exactly it."""
    self.protected = self.version_path.name

  def _prune(self) -> None:
    versions = sorted(p for p in self.index_root.glob("v*") if p.is_dir())
    for old in versions[:-max(self.config.keep, 1)]:
      if old.name != self.protected:
        shutil.rmtree(old, ignore_errors=True)
