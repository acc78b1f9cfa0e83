"""The tokenised corpus on disk, for REALM pre-training's candidate lookup in bounded memory.

At paper scale the corpus is 13.35M blocks x 288 wordpieces: 15 GB of int32, more again as the
per-block lists `pipelines.base.load_corpus` keeps, beside a loaded model. Pre-training only
needs each candidate's `[CLS] title [SEP] body [SEP]` row and where its body is, so the corpus
task is streamed once into `tokens.npy` [N, block_len] int32 (+ `body.npy` [N, 2]: body start
and length in the row, `ids.npy` [N]) and read back as read-only memory maps: the trainer's
resident memory is then the rows it touches, not the corpus.

Files are written under temporary names and renamed; `manifest.json` (written last) holds the
corpus fingerprint (task, block length, vocabulary, source files' sizes and times) and each
file's size and sha256. On opening, a fingerprint that differs (the corpus or the lengths
changed), a file of another size (truncated) or checksum (damaged) is an InputError naming the
file; `ensure` rebuilds the folder then, since it is derived data.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_path, atomic_write_json

FORMAT = 1
FOLDER = "corpus_tokens"   # under a pre-training run's folder
MANIFEST = "manifest.json"
FILES = {"tokens": ("tokens.npy", np.int32), "body": ("body.npy", np.int32),
         "ids": ("ids.npy", np.int64)}
_CHUNK = 1 << 24   # bytes hashed per read: a paper-scale file is read in bounded memory


@dataclasses.dataclass
class TokenCorpus:
  """What `batching.pretrain_batch` reads of a corpus, backed by the token file."""
  ids: np.ndarray           # [N] int64, in memory (8 bytes a block)
  doc_inputs: np.ndarray    # [N, block_len] int32, read-only memmap
  body_bounds: np.ndarray   # [N, 2] int32 (start, length) of the body in each row, memmap
  max_body_len: int

  def __post_init__(self):
    # Sorted ids instead of a dict: a dict of 13M ints costs about 1 GB.
    self._order = np.argsort(self.ids, kind="stable")
    self._sorted = self.ids[self._order]

  def row(self, block_id: int) -> int:
    pos = int(np.searchsorted(self._sorted, block_id))
    if pos == len(self._sorted) or self._sorted[pos] != block_id:
      raise KeyError(block_id)
    return int(self._order[pos])

  def rows(self, block_ids) -> np.ndarray:
    return np.vectorize(self.row, otypes=[np.int64])(block_ids)

  def body(self, row: int) -> np.ndarray:
    start, length = (int(v) for v in self.body_bounds[row])
    return np.asarray(self.doc_inputs[row, start:start + length])


def source_fingerprint(task_name: str, block_len: int) -> dict[str, Any]:
  """The corpus task, its block length and vocabulary, and its source files as they are now."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  from realm_bench.tasks import data  # pylint: disable=g-import-not-at-top
  task = seqio.get_mixture_or_task(task_name)
  vocab = task.output_features["inputs"].vocabulary
  vocab = vocab.resolve() if hasattr(vocab, "resolve") else vocab
  files = {}
  source = task.source
  if isinstance(source, data.RootedSource):
    root = data.ROOTS[source.kind]()
    for name in source.files.split("|"):
      path = Path(root) / name
      if path.exists():
        stat = path.stat()
        files[str(path)] = [stat.st_size, stat.st_mtime_ns]
  return {"format": FORMAT, "task": task_name, "block_len": int(block_len),
          "vocabulary": str(vocab.path), "files": files}


def task_rows(task_name: str, block_len: int) -> Iterator[tuple[int, np.ndarray, int, int]]:
  """(id, inputs, body start, body length) per block of a seqio corpus task, in file order."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  task = seqio.get_mixture_or_task(task_name)
  dataset = task.get_dataset(sequence_length={"inputs": block_len}, split="train",
                             shuffle=False, num_epochs=1, use_cached=False)
  for ex in dataset.as_numpy_iterator():
    start = 2 + len(ex["title_ids"])   # [CLS] title [SEP]
    yield int(ex["id"]), ex["inputs"], start, len(ex["body_ids"])


def _hash(path: Path) -> str:
  """sha256 of a `.npy`'s data (the bytes after its header), read in bounded chunks."""
  digest = hashlib.sha256()
  with open(path, "rb") as f:
    np.lib.format.read_magic(f)
    np.lib.format.read_array_header_1_0(f)
    while chunk := f.read(_CHUNK):
      digest.update(chunk)
  return digest.hexdigest()


class _Writer:
  """One `.npy` of a row count not known in advance (the corpus is one streamed pass): the
  header is written for a huge count, and rewritten with the real one when done (its padded
  length is the same). The data's sha256 is taken as it is written."""

  def __init__(self, tmp: Path, dtype, width: int | None):
    self.f, self.dtype, self.width, self.rows = open(tmp, "wb"), np.dtype(dtype), width, 0
    self.digest = hashlib.sha256()
    self.data_start = self._header(10 ** 15)

  def _header(self, rows: int) -> int:
    self.f.seek(0)
    np.lib.format.write_array_header_1_0(self.f, {
        "descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
        "shape": (rows,) if self.width is None else (rows, self.width)})
    return self.f.tell()

  def write(self, rows: np.ndarray) -> None:
    data = np.ascontiguousarray(rows, self.dtype).tobytes()
    self.f.write(data)
    self.digest.update(data)
    self.rows += rows.shape[0]

  def close(self) -> dict[str, Any]:
    end = self.f.tell()
    if self._header(self.rows) != self.data_start:
      raise AssertionError("the .npy header changed length")
    self.f.flush()
    os.fsync(self.f.fileno())
    self.f.close()
    return {"bytes": end, "sha256": self.digest.hexdigest()}


def write(folder, rows: Iterable[tuple[int, np.ndarray, int, int]], *, block_len: int,
          fingerprint: dict[str, Any], batch: int = 4096) -> None:
  """Streams `rows` (id, inputs, body start, body length) into the token files of `folder`."""
  folder = Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  (folder / MANIFEST).unlink(missing_ok=True)   # the folder is incomplete until it is back
  count, max_body = 0, 0
  with atomic_path(folder / FILES["tokens"][0]) as t_tmp, \
      atomic_path(folder / FILES["body"][0]) as b_tmp, \
      atomic_path(folder / FILES["ids"][0]) as i_tmp:
    writers = {"tokens": _Writer(t_tmp, np.int32, block_len), "body": _Writer(b_tmp, np.int32, 2),
               "ids": _Writer(i_tmp, np.int64, None)}
    buf: dict[str, list] = {"tokens": [], "body": [], "ids": []}

    def flush():
      if buf["ids"]:
        for key, values in buf.items():
          writers[key].write(np.stack(values) if key == "tokens" else np.asarray(values))
          values.clear()

    for block_id, inputs, start, length in rows:
      if len(inputs) > block_len:
        raise InputError(f"block {block_id} has {len(inputs)} wordpieces, more than the block "
                         f"length {block_len}", field="BLOCK_LEN")
      padded = np.zeros(block_len, np.int32)
      padded[:len(inputs)] = inputs
      buf["tokens"].append(padded)
      buf["body"].append((start, length))
      buf["ids"].append(block_id)
      max_body, count = max(max_body, length), count + 1
      if len(buf["ids"]) == batch:
        flush()
    flush()
    files = {FILES[key][0]: w.close() for key, w in writers.items()}
  atomic_write_json(folder / MANIFEST, {
      "fingerprint": fingerprint, "rows": count, "block_len": block_len,
      "max_body_len": max_body, "files": files})


def open_corpus(folder, fingerprint: dict[str, Any], *, verify: bool = True) -> TokenCorpus:
  """The token files of `folder` as a `TokenCorpus`; InputError naming the file when any is
  missing, was made from another corpus, is truncated or (with `verify`) damaged."""
  folder = Path(folder)
  manifest_path = folder / MANIFEST
  if not manifest_path.exists():
    raise InputError("no token-file manifest (never written, or the write was interrupted)",
                     path=manifest_path)
  manifest = json.loads(manifest_path.read_text())
  if manifest.get("fingerprint") != json.loads(json.dumps(fingerprint)):
    raise InputError(f"the token file was made from another corpus or block length "
                     f"({manifest.get('fingerprint')}, now {fingerprint})", path=manifest_path,
                     field="fingerprint")
  arrays = {}
  for key, (name, dtype) in FILES.items():
    path, want = folder / name, manifest["files"][name]
    if not path.exists() or path.stat().st_size != want["bytes"]:
      size = path.stat().st_size if path.exists() else "absent"
      raise InputError(f"expected {want['bytes']} bytes, found {size} (truncated?)", path=path)
    if verify and _hash(path) != want["sha256"]:
      raise InputError("the file's sha256 differs from its manifest's (damaged)", path=path)
    arrays[key] = np.load(path, mmap_mode="r")
    if arrays[key].dtype != dtype or arrays[key].shape[0] != manifest["rows"]:
      raise InputError(f"expected {manifest['rows']} rows of {np.dtype(dtype)}, found "
                       f"{arrays[key].shape} {arrays[key].dtype}", path=path)
  return TokenCorpus(ids=np.array(arrays["ids"]), doc_inputs=arrays["tokens"],
                     body_bounds=arrays["body"], max_body_len=int(manifest["max_body_len"]))


def ensure(folder, fingerprint: dict[str, Any],
           make_rows: Callable[[], Iterable[tuple[int, np.ndarray, int, int]]], *,
           block_len: int) -> TokenCorpus:
  """The token files of `folder`, (re)written from `make_rows()` when absent, stale, truncated
  or damaged (the reason goes to stderr: a rebuild at paper scale takes a while)."""
  try:
    return open_corpus(folder, fingerprint)
  except InputError as e:
    if Path(folder, MANIFEST).exists() or any(Path(folder, n).exists() for n, _ in FILES.values()):
      sys.stderr.write(f"rebuilding the corpus token file: {e}\n")
  write(folder, make_rows(), block_len=block_len, fingerprint=fingerprint)
  return open_corpus(folder, fingerprint, verify=False)


def load_candidates(task_name: str, block_len: int, folder) -> TokenCorpus:
  """The corpus task's blocks as a `TokenCorpus` in `folder`, tokenised there once."""
  fingerprint = source_fingerprint(task_name, block_len)
  return ensure(folder, fingerprint, lambda: task_rows(task_name, block_len),
                block_len=block_len)
