"""Maximum inner-product search behind one interface.

`ExactIndex` is the ground truth: a jitted matmul plus an exact two-stage top-k, with the
embedding rows sharded across every local device so that each device scores its shard and XLA
merges the top-k. Approximate indexes (`scann_index.ScannIndex`) implement the same `MipsIndex` methods,
and their recall is measured against exact search rather than assumed.

An index on disk is a folder: `embeddings.npy`, `ids.npy`, whatever the index kind adds (a
ScaNN searcher's files) and `manifest.json`, written under a temporary name and renamed, so a
reader never sees half an index. `load_index` reads the manifest's `kind` to pick the class from
`INDEX_KINDS`.
"""
from __future__ import annotations

import abc
import functools
import hashlib
import importlib
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

# Rows hashed per step: 1M rows of 128 floats is 512 MB, so a 13M-row memmap is hashed without
# ever being copied whole.
CHECKSUM_CHUNK_ROWS = 1 << 20
# Rows moved to the device per step when an ExactIndex is placed (128 MB at 128 dims).
PLACE_CHUNK_ROWS = 1 << 18


def embeddings_checksum(embeddings: np.ndarray, *, chunk_rows: int = CHECKSUM_CHUNK_ROWS) -> str:
  """sha256 of the rows as contiguous float32 bytes, fed to the hash one chunk at a time."""
  digest = hashlib.sha256()
  for start in range(0, embeddings.shape[0], chunk_rows):
    digest.update(np.ascontiguousarray(embeddings[start:start + chunk_rows], np.float32))
  return digest.hexdigest()


def exact_top_k(embeddings: np.ndarray, queries: np.ndarray, k: int, *,
                max_scores: int = 1 << 23) -> tuple[np.ndarray, np.ndarray]:
  """(scores [Q, k], rows [Q, k]) best first, by numpy over row chunks of `embeddings`.

  The host-side ground truth for recall checks: unlike `ExactIndex` it never holds more than
  one chunk of rows and `max_scores` scores (32 MB, ~150 MB in flight with argpartition's
  int64 positions), so it runs over a 13M-row memmap in bounded memory.
  """
  queries = np.asarray(queries, np.float32)
  num_rows = embeddings.shape[0]
  k = min(int(k), num_rows)
  if k == 0:
    return np.zeros((queries.shape[0], 0), np.float32), np.zeros((queries.shape[0], 0), np.int64)
  best_scores = np.full((queries.shape[0], 0), -np.inf, np.float32)
  best_rows = np.zeros((queries.shape[0], 0), np.int64)
  chunk = max(k, max_scores // max(queries.shape[0], 1))
  for start in range(0, num_rows, chunk):
    scores = queries @ np.asarray(embeddings[start:start + chunk], np.float32).T
    if scores.shape[1] > k:
      part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
      part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    best_scores = np.concatenate([best_scores, np.take_along_axis(scores, part, 1)], axis=1)
    best_rows = np.concatenate([best_rows, part + start], axis=1)
    keep = np.argsort(-best_scores, axis=1, kind="stable")[:, :k]
    best_scores = np.take_along_axis(best_scores, keep, 1)
    best_rows = np.take_along_axis(best_rows, keep, 1)
  return best_scores, best_rows


def _load_npy(path: Path, **kwargs) -> np.ndarray:
  """np.load with a clean error: a truncated file otherwise fails inside numpy's mmap."""
  if not path.is_file():
    raise InputError("missing from the index folder", path=path)
  try:
    return np.load(path, allow_pickle=False, **kwargs)
  except (ValueError, OSError, EOFError) as e:
    raise InputError(f"truncated or not a .npy file ({e})", path=path) from None


def _count(manifest: dict, key: str, path: Path) -> int:
  value = manifest.get(key)
  if isinstance(value, bool) or not isinstance(value, int) or value < 0:
    raise InputError(f"expected a non-negative integer, got {value!r}",
                     path=path / "manifest.json", field=key)
  return value


def read_files(path: Path, manifest: dict) -> tuple[np.ndarray, np.ndarray]:
  """(embeddings memmap, ids) of an index folder, checked against its manifest: the shapes it
  names (num_blocks x dim, one id a row) and the checksum of the rows."""
  num_blocks, dim = _count(manifest, "num_blocks", path), _count(manifest, "dim", path)
  embeddings = _load_npy(path / "embeddings.npy", mmap_mode="r")
  if embeddings.ndim != 2 or embeddings.dtype != np.float32:
    raise InputError(f"expected a float32 matrix, got {embeddings.dtype} of shape "
                     f"{embeddings.shape}", path=path / "embeddings.npy")
  for key, want, got in (("num_blocks", num_blocks, embeddings.shape[0]),
                         ("dim", dim, embeddings.shape[1])):
    if want != got:
      raise InputError(f"the manifest says {key} = {want}, embeddings.npy holds "
                       f"{embeddings.shape[0]} x {embeddings.shape[1]}",
                       path=path / "manifest.json", field=key)
  ids = _load_npy(path / "ids.npy")
  if ids.shape != (num_blocks,) or not np.issubdtype(ids.dtype, np.integer):
    raise InputError(f"expected {num_blocks} integer ids (one a row of embeddings.npy), got "
                     f"{ids.dtype} of shape {ids.shape}", path=path / "ids.npy")
  if embeddings_checksum(embeddings) != manifest.get("checksum"):
    raise InputError("index embeddings do not match the manifest checksum",
                     path=path / "embeddings.npy", field="checksum")
  return embeddings, ids


def check_corpus(index: "MipsIndex", corpus_ids: np.ndarray, *, path, corpus: str,
                 dim: int | None = None) -> None:
  """The index covers exactly the corpus's blocks, in its order, at the model's width."""
  if not np.array_equal(np.asarray(index.ids), np.asarray(corpus_ids)):
    raise InputError(f"the index holds {index.num_blocks} blocks that are not the corpus "
                     f"{corpus!r} ({len(corpus_ids)} blocks, in file order): was it built "
                     "from another corpus?", path=path, field="ids")
  if dim is not None and index.embeddings.shape[1] != dim:
    raise InputError(f"the index's embeddings have {index.embeddings.shape[1]} dimensions, "
                     f"this model's retriever projects to {dim} (another model size?)",
                     path=path, field="dim")


def read_manifest(path) -> tuple[Path, dict[str, Any]]:
  path = Path(path)
  manifest_path = path / "manifest.json"
  if not manifest_path.exists():
    raise InputError("not an index folder (no manifest.json)", path=path)
  try:
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
  except UnicodeDecodeError as e:
    raise InputError(f"not UTF-8 text ({e.reason})", path=manifest_path) from None
  except json.JSONDecodeError as e:
    raise InputError(f"not valid JSON: {e.msg}", path=manifest_path, line=e.lineno) from None
  if not isinstance(manifest, dict):
    raise InputError("expected a JSON object", path=manifest_path)
  return path, manifest


class MipsIndex(abc.ABC):
  """Top-k documents by inner product; `manifest` says what the index was built from.

  Subclasses name their `kind` (the manifest field `load_index` dispatches on), may write
  extra files in `_save_extra` and restore from them in `_restore`, so loading a saved
  approximate index deserialises it instead of training it again.
  """

  kind: str
  manifest: dict[str, Any]
  ids: np.ndarray

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

  def _save_extra(self, folder: Path) -> None:
    """Writes files beyond embeddings, ids and manifest into the not-yet-renamed folder."""

  @classmethod
  def _restore(cls, path: Path, embeddings: np.ndarray, ids: np.ndarray,
               manifest: dict[str, Any]) -> "MipsIndex":
    """The index saved in `path`, its embeddings (a read-only memmap) already verified."""
    index = cls()
    index.build(embeddings, ids, manifest=manifest)
    return index

  def save(self, path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
      np.save(tmp / "embeddings.npy", self.embeddings)
      np.save(tmp / "ids.npy", self.ids)
      self._save_extra(tmp)
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
    path, manifest = read_manifest(path)
    if manifest.get("kind") != cls.kind:
      raise InputError(f"index kind is {manifest.get('kind')!r}, expected {cls.kind!r} "
                       "(load_index picks the class from the manifest)",
                       path=path / "manifest.json", field="kind")
    embeddings, ids = read_files(path, manifest)
    return cls._restore(path, embeddings, ids, manifest)


# Every index kind by the manifest `kind` it writes: "module:Class", imported only when an index
# of that kind is loaded (ScaNN's package imports TensorFlow, which exact-only runs need not
# pay), so this module never imports the approximate ones.
INDEX_KINDS = {
    "exact": "realm_bench.retrieval.index:ExactIndex",
    "scann": "realm_bench.retrieval.scann_index:ScannIndex",
}


def index_class(kind: str, *, path=None) -> type[MipsIndex]:
  if kind not in INDEX_KINDS:
    raise InputError(f"unknown index kind {kind!r} (known: {', '.join(map(repr, INDEX_KINDS))})",
                     path=path, field="kind")
  module, _, name = INDEX_KINDS[kind].partition(":")
  return getattr(importlib.import_module(module), name)


def load_index(path) -> MipsIndex:
  """The index saved in `path`, of the class its manifest's `kind` names."""
  path, manifest = read_manifest(path)
  return index_class(manifest.get("kind"), path=path / "manifest.json").load(path)


@gin.configurable
class ExactIndex(MipsIndex):
  """Brute-force MIPS on the accelerator(s); exact by construction.

  Top-k is taken in two stages: the rows are cut into blocks of `top_k_block`, each block's
  best score is kept, and only the k blocks with the highest maxima are searched. That is
  still exact (an element outside those blocks is beaten by the k maxima, each in a different
  block), and it matters on CPUs: `lax.top_k` over 1M scores a query cost half as much as
  the matmul itself, where a max-reduce and a top-k over k * top_k_block scores cost little.
  """

  kind = "exact"

  def __init__(self, *, query_batch: int = 1024, top_k_block: int = 1024):
    self.query_batch = query_batch
    self.top_k_block = top_k_block
    self._embeddings = None
    self.ids = None
    self.manifest = {}

  def build(self, embeddings, ids, *, manifest=None):
    embeddings = np.asarray(embeddings, np.float32)
    ids = np.asarray(ids, np.int64)
    if embeddings.ndim != 2 or ids.shape != (embeddings.shape[0],):
      raise ValueError(f"embeddings {embeddings.shape} and ids {ids.shape} do not match")
    self._place(embeddings, ids)
    self.manifest = dict(manifest or {})
    self.manifest.update(kind=self.kind, num_blocks=int(embeddings.shape[0]),
                         dim=int(embeddings.shape[1]), checksum=embeddings_checksum(embeddings))

  @classmethod
  def _restore(cls, path, embeddings, ids, manifest):
    # The checksum was verified by `load`; hashing the rows a second time would only cost.
    index = cls()
    index._place(embeddings, np.asarray(ids, np.int64))
    index.manifest = dict(manifest)
    return index

  def _place(self, embeddings: np.ndarray, ids: np.ndarray) -> None:
    """Puts the rows on device transposed, [dim, rows]: whole blocks, then the remainder.

    Transposed because XLA's CPU matrix-vector product reads a [dim, rows] matrix ~20% faster
    than [rows, dim] for a single query (same speed for batches). The transpose is written
    chunk by chunk into a donated device buffer, so a memmap is never copied whole on host.
    """
    self._embeddings = embeddings
    self.ids = ids
    rows, dim = embeddings.shape
    head_rows = rows - rows % self.top_k_block
    # This process's devices: in a multi-process run each process holds only its own rows
    # (`sharded_index`), and the global device list would include other hosts'.
    devices = jax.local_devices()
    sharding = None
    if len(devices) > 1 and (head_rows // self.top_k_block) % len(devices) == 0:
      mesh = jax.sharding.Mesh(np.array(devices), ("rows",))
      sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "rows"))
    head = jax.jit(lambda: jnp.zeros((dim, head_rows), jnp.float32), out_shardings=sharding)()
    for start in range(0, head_rows, PLACE_CHUNK_ROWS):
      chunk = np.asarray(embeddings[start:min(start + PLACE_CHUNK_ROWS, head_rows)], np.float32)
      head = _put_columns(head, chunk, start)
    self._device_head = head
    self._device_tail = jnp.asarray(np.asarray(embeddings[head_rows:], np.float32).T)

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
      s, r = _top_k(jnp.asarray(queries[start:start + self.query_batch]), self._device_head,
                    self._device_tail, k, self.top_k_block)
      scores.append(np.asarray(s))
      rows.append(np.asarray(r))
    scores = np.concatenate(scores) if scores else np.zeros((0, k), np.float32)
    rows = np.concatenate(rows) if rows else np.zeros((0, k), np.int64)
    return scores, self.ids[rows]


@functools.partial(jax.jit, donate_argnums=0)
def _put_columns(buffer, chunk, start):
  return jax.lax.dynamic_update_slice(buffer, chunk.T, (0, start))


@jax.jit(static_argnames=("k", "block"))
def _top_k(queries, head, tail, k, block):
  """(scores, rows) of the k best of head rows (whole blocks) then tail rows, both [dim, n]."""
  num_queries, head_rows = queries.shape[0], head.shape[1]
  num_blocks = head_rows // block
  head_scores = queries @ head
  tail_scores = queries @ tail
  if 4 * k * block > head_rows:   # the blocks would hold most rows: one top_k is cheaper
    return jax.lax.top_k(jnp.concatenate([head_scores, tail_scores], axis=1), k)
  blocks = head_scores.reshape(num_queries, num_blocks, block)
  _, best = jax.lax.top_k(blocks.max(axis=-1), k)
  candidates = jnp.take_along_axis(blocks, best[:, :, None], axis=1)
  candidate_rows = best[:, :, None] * block + jnp.arange(block)
  tail_rows = jnp.broadcast_to(head_rows + jnp.arange(tail.shape[1]),
                               (num_queries, tail.shape[1]))
  scores = jnp.concatenate([candidates.reshape(num_queries, k * block), tail_scores], axis=1)
  rows = jnp.concatenate([candidate_rows.reshape(num_queries, k * block), tail_rows], axis=1)
  top_scores, positions = jax.lax.top_k(scores, k)
  return top_scores, jnp.take_along_axis(rows, positions, axis=1)
