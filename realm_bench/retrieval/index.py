"""Maximum inner-product search behind one interface.

`ExactIndex` is the ground truth: a jitted matmul plus `lax.top_k`, with the embedding rows
sharded across every local device so that each device scores its shard and XLA merges the
top-k. Approximate indexes (ScaNN) implement the same `MipsIndex` methods, and their recall is
measured against this one rather than assumed.

An index on disk is a folder: `embeddings.npy`, `ids.npy` and `manifest.json`, written under a
temporary name and renamed, so a reader never sees half an index.
"""
from __future__ import annotations

import abc
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import gin
import jax
import jax.numpy as jnp
import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_json


def embeddings_checksum(embeddings: np.ndarray) -> str:
  return hashlib.sha256(np.ascontiguousarray(embeddings, np.float32).tobytes()).hexdigest()


class MipsIndex(abc.ABC):
  """Top-k documents by inner product; `manifest` says what the index was built from."""

  manifest: dict[str, Any]

  @abc.abstractmethod
  def build(self, embeddings: np.ndarray, ids: np.ndarray, *, manifest=None) -> None:
    ...

  @abc.abstractmethod
  def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Returns (scores [Q, k], ids [Q, k]), best first."""

  @property
  @abc.abstractmethod
  def embeddings(self) -> np.ndarray:
    """The stored document embeddings (fine-tuning reads them as frozen inputs)."""

  @property
  def num_blocks(self) -> int:
    return int(self.embeddings.shape[0])

  def save(self, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
      np.save(tmp / "embeddings.npy", self.embeddings)
      np.save(tmp / "ids.npy", self.ids)
      atomic_write_json(tmp / "manifest.json", self.manifest)
      if path.exists():
        shutil.rmtree(path)
      os.replace(tmp, path)
    finally:
      if tmp.exists():
        shutil.rmtree(tmp)
    return path

  @classmethod
  def load(cls, path) -> "MipsIndex":
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.exists():
      raise InputError("not an index folder (no manifest.json)", path=path)
    manifest = json.loads(manifest_path.read_text())
    embeddings = np.load(path / "embeddings.npy")
    if embeddings_checksum(embeddings) != manifest.get("checksum"):
      raise InputError("index embeddings do not match the manifest checksum",
                       path=path / "embeddings.npy", field="checksum")
    index = cls()
    index.build(embeddings, np.load(path / "ids.npy"), manifest=manifest)
    return index


@gin.configurable
class ExactIndex(MipsIndex):
  """Brute-force MIPS on the accelerator(s); exact by construction."""

  def __init__(self, *, query_batch: int = 1024):
    self.query_batch = query_batch
    self._embeddings = None
    self.ids = None
    self.manifest = {}

  def build(self, embeddings, ids, *, manifest=None):
    embeddings = np.asarray(embeddings, np.float32)
    ids = np.asarray(ids, np.int64)
    if embeddings.ndim != 2 or ids.shape != (embeddings.shape[0],):
      raise ValueError(f"embeddings {embeddings.shape} and ids {ids.shape} do not match")
    self._embeddings = embeddings
    self.ids = ids
    devices = jax.devices()
    rows = embeddings.shape[0]
    if len(devices) > 1 and rows % len(devices) == 0:
      mesh = jax.sharding.Mesh(np.array(devices), ("rows",))
      sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("rows", None))
      self._device_embeddings = jax.device_put(embeddings, sharding)
    else:
      self._device_embeddings = jnp.asarray(embeddings)
    self.manifest = dict(manifest or {})
    self.manifest.update(kind="exact", num_blocks=int(rows), dim=int(embeddings.shape[1]),
                         checksum=embeddings_checksum(embeddings))

  @property
  def embeddings(self):
    return self._embeddings

  def search(self, queries, k):
    if self._embeddings is None:
      raise RuntimeError("search before build")
    k = min(int(k), self.num_blocks)
    queries = np.asarray(queries, np.float32)
    scores, rows = [], []
    for start in range(0, queries.shape[0], self.query_batch):
      s, r = _top_k(jnp.asarray(queries[start:start + self.query_batch]),
                    self._device_embeddings, k)
      scores.append(np.asarray(s))
      rows.append(np.asarray(r))
    scores = np.concatenate(scores) if scores else np.zeros((0, k), np.float32)
    rows = np.concatenate(rows) if rows else np.zeros((0, k), np.int64)
    return scores, self.ids[rows]


@jax.jit(static_argnames="k")
def _top_k(queries, embeddings, k):
  return jax.lax.top_k(queries @ embeddings.T, k)
