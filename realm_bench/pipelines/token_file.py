"""The tokenised corpus on disk: every pipeline reads its blocks from it in bounded memory.

At paper scale the corpus is 13.35M blocks x 288 wordpieces: 15 GB of int32, more again as the
per-block lists `pipelines.base.load_corpus` keeps, beside a loaded model. So the corpus task is
streamed once into files read back as read-only memory maps, and a trainer's resident memory is
the rows it touches, not the corpus:

  tokens.npy  [N, block_len] int32  `[CLS] title [SEP] body [SEP]`, 0-padded (the title's
                                     and body's wordpieces are slices of it)
  body.npy    [N, 2] int32          body start and length in each row
  ids.npy     [N] int64             block ids (loaded: 8 bytes a block)
  chars.npy   [P, 2] uint16         character (start, end) of each body wordpiece, rows' pieces
                                     one after another (P = the bodies' lengths summed); uint16
                                     halves 30 GB to 15 GB at paper scale (a block of 288
                                     pieces is ~1,500 characters; a body past 65,535 is refused)
  text.npy    [C] uint8             the UTF-8 titles and bodies, one after another
  text_at.npy [N, 3] int64          byte offsets of each row's title, body and body end

`TokenCorpus` reads them with the interface of the in-memory `batching.Corpus`, so REALM's
candidates, ORQA's reader inputs and answer matching, ICT's sentences and BERT's corpus rows
come from the same rows either way.

A run keeps them in its own folder (`RUN_DIR/corpus_tokens/`) unless a shared folder is set
(macro CORPUS_TOKENS_DIR, tasks.gin): then every run that reads the same corpus task with the
same vocabulary and block length opens one copy there, made by the first (`ensure_shared`), as
the quickstart and `reproduce` do; a paper-scale copy is 15 GB and half a minute's work or
more, an evaluation of the synthetic world's six seconds.

Files are written under temporary names and renamed; `manifest.json` (written last) holds the
corpus fingerprint (task, block length, vocabulary, source files' sizes and times) and each
file's size and sha256. On opening, a fingerprint that differs (the corpus or the lengths
changed, or a folder of an older format), a file of another size (truncated) or checksum
(damaged) is an InputError naming the file; `ensure` rebuilds the folder then, since it is
derived data.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_path, atomic_write_json

FORMAT = 2
FOLDER = "corpus_tokens"   # under a run's folder
MANIFEST = "manifest.json"
# key: (file, dtype, row width; None for a flat array)
FILES = {"tokens": ("tokens.npy", np.int32, "block_len"), "body": ("body.npy", np.int32, 2),
         "ids": ("ids.npy", np.int64, None), "chars": ("chars.npy", np.uint16, 2),
         "text": ("text.npy", np.uint8, None), "text_at": ("text_at.npy", np.int64, 3)}
PER_BLOCK = ("tokens", "body", "ids", "text_at")   # one row per block; the others are flat
_CHUNK = 1 << 24   # bytes hashed per read: a paper-scale file is read in bounded memory


class BlockRow(NamedTuple):
  """One block as the token file stores it."""
  id: int
  inputs: np.ndarray     # [CLS] title [SEP] body [SEP]
  body_start: int        # index of the body's first wordpiece in `inputs`
  body_len: int
  title: str
  body: str
  piece_starts: np.ndarray   # character offset of each body wordpiece in `body`
  piece_ends: np.ndarray


class _Rows(Sequence):
  """A lazy per-block column: row r is computed from the memory maps when asked for."""

  def __init__(self, n: int, get: Callable[[int], Any]):
    self._n, self._get = n, get

  def __len__(self) -> int:
    return self._n

  def __getitem__(self, row):
    if isinstance(row, slice):
      return [self._get(r) for r in range(*row.indices(self._n))]
    row = int(row)
    if not -self._n <= row < self._n:
      raise IndexError(row)
    return self._get(row % self._n)


@dataclasses.dataclass
class TokenCorpus:
  """A `batching.Corpus`'s interface (ids, doc_inputs, titles, bodies, title_ids, body_ids,
  body_starts, body_ends, row, rows, body, max_body_len, max_title_len), backed by the files."""
  ids: np.ndarray           # [N] int64, in memory
  doc_inputs: np.ndarray    # [N, block_len] int32, read-only memmap
  body_bounds: np.ndarray   # [N, 2] int32 (start, length) of the body in each row, memmap
  chars: np.ndarray         # [P, 2] uint16, memmap
  text: np.ndarray          # [C] uint8, memmap
  text_at: np.ndarray       # [N, 3] int64, memmap
  max_body_len: int
  max_title_len: int

  def __post_init__(self):
    # Sorted ids instead of a dict: a dict of 13M ints costs about 1 GB.
    self._order = np.argsort(self.ids, kind="stable")
    self._sorted = self.ids[self._order]
    # Where each row's pieces start in `chars` (8 bytes a block).
    self._piece_at = np.concatenate([[0], np.cumsum(self.body_bounds[:, 1], dtype=np.int64)])
    n = len(self.ids)
    self.titles = _Rows(n, lambda r: self._text(r, 0))
    self.bodies = _Rows(n, lambda r: self._text(r, 1))
    self.title_ids = _Rows(n, lambda r: np.asarray(
        self.doc_inputs[r, 1:int(self.body_bounds[r, 0]) - 1]))
    self.body_ids = _Rows(n, self.body)
    self.body_starts = _Rows(n, lambda r: self._chars(r, 0))
    self.body_ends = _Rows(n, lambda r: self._chars(r, 1))

  def _text(self, row: int, which: int) -> str:
    start, end = (int(v) for v in self.text_at[row, which:which + 2])
    return self.text[start:end].tobytes().decode("utf-8")

  def _chars(self, row: int, which: int) -> np.ndarray:
    return self.chars[self._piece_at[row]:self._piece_at[row + 1], which].astype(np.int64)

  def row(self, block_id: int) -> int:
    pos = int(np.searchsorted(self._sorted, block_id))
    if pos == len(self._sorted) or self._sorted[pos] != block_id:
      raise KeyError(block_id)
    return int(self._order[pos])

  def rows(self, block_ids) -> np.ndarray:
    block_ids = np.asarray(block_ids, np.int64)
    pos = np.minimum(np.searchsorted(self._sorted, block_ids), max(len(self._sorted) - 1, 0))
    if not len(self._sorted) or (self._sorted[pos] != block_ids).any():
      missing = block_ids[self._sorted[pos] != block_ids] if len(self._sorted) else block_ids
      raise KeyError(int(missing.flat[0]))
    return self._order[pos]

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


def task_rows(task_name: str, block_len: int) -> Iterator[BlockRow]:
  """Every block of a seqio corpus task, in file order."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  from realm_bench.tasks.metrics import to_text  # pylint: disable=g-import-not-at-top
  task = seqio.get_mixture_or_task(task_name)
  dataset = task.get_dataset(sequence_length={"inputs": block_len}, split="train",
                             shuffle=False, num_epochs=1, use_cached=False)
  for ex in dataset.as_numpy_iterator():
    yield BlockRow(int(ex["id"]), ex["inputs"], 2 + len(ex["title_ids"]),   # [CLS] title [SEP]
                   len(ex["body_ids"]), to_text(ex["title"]), to_text(ex["body"]),
                   ex["body_starts"], ex["body_ends"])


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


def write(folder, rows: Iterable[BlockRow], *, block_len: int, fingerprint: dict[str, Any],
          batch: int = 4096) -> None:
  """Streams `rows` into the token files of `folder`; a folder this call made is removed again
  if it fails (a run whose set-up fails leaves nothing behind)."""
  folder = Path(folder)
  created = not folder.exists()
  folder.mkdir(parents=True, exist_ok=True)
  try:
    _write(folder, rows, block_len=block_len, fingerprint=fingerprint, batch=batch)
  except BaseException:
    if created:
      shutil.rmtree(folder, ignore_errors=True)
    raise


def _write(folder: Path, rows, *, block_len, fingerprint, batch) -> None:
  (folder / MANIFEST).unlink(missing_ok=True)   # the folder is incomplete until it is back
  count, max_body, max_title, text_bytes = 0, 0, 0, 0
  with contextlib.ExitStack() as stack:
    writers = {}
    for key, (name, dtype, width) in FILES.items():
      tmp = stack.enter_context(atomic_path(folder / name))
      writers[key] = _Writer(tmp, dtype, block_len if width == "block_len" else width)
    buf: dict[str, list] = {key: [] for key in FILES}

    def flush():
      for key, values in buf.items():
        if values:
          writers[key].write(np.concatenate(values) if key in ("chars", "text") else
                             np.stack(values) if key == "tokens" else np.asarray(values))
          values.clear()

    for r in rows:
      if len(r.inputs) > block_len:
        raise InputError(f"block {r.id} has {len(r.inputs)} wordpieces, more than the block "
                         f"length {block_len}", field="BLOCK_LEN")
      if len(r.piece_starts) != r.body_len or len(r.piece_ends) != r.body_len:
        raise InputError(f"block {r.id}: {r.body_len} body wordpieces but "
                         f"{len(r.piece_starts)} character offsets", field="body_starts")
      if r.body_len and int(np.max(r.piece_ends)) > np.iinfo(np.uint16).max:
        raise InputError(f"block {r.id}'s body is longer than {np.iinfo(np.uint16).max} "
                         "characters, more than a block of wordpieces holds", field="body")
      padded = np.zeros(block_len, np.int32)
      padded[:len(r.inputs)] = r.inputs
      title, body = r.title.encode("utf-8"), r.body.encode("utf-8")
      buf["tokens"].append(padded)
      buf["body"].append((r.body_start, r.body_len))
      buf["ids"].append(r.id)
      buf["chars"].append(np.stack([r.piece_starts, r.piece_ends], 1).reshape(-1, 2))
      buf["text"].append(np.frombuffer(title + body, np.uint8))
      buf["text_at"].append((text_bytes, text_bytes + len(title),
                             text_bytes + len(title) + len(body)))
      text_bytes += len(title) + len(body)
      max_body, count = max(max_body, r.body_len), count + 1
      max_title = max(max_title, r.body_start - 2)
      if len(buf["ids"]) == batch:
        flush()
    flush()
    files = {FILES[key][0]: w.close() for key, w in writers.items()}
  atomic_write_json(folder / MANIFEST, {
      "fingerprint": fingerprint, "rows": count, "block_len": block_len,
      "max_body_len": max_body, "max_title_len": max_title, "files": files})


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
  for key, (name, dtype, _) in FILES.items():
    path, want = folder / name, manifest["files"][name]
    if not path.exists() or path.stat().st_size != want["bytes"]:
      size = path.stat().st_size if path.exists() else "absent"
      raise InputError(f"expected {want['bytes']} bytes, found {size} (truncated?)", path=path)
    if verify and _hash(path) != want["sha256"]:
      raise InputError("the file's sha256 differs from its manifest's (damaged)", path=path)
    arrays[key] = np.load(path, mmap_mode="r")
    if arrays[key].dtype != dtype or (key in PER_BLOCK
                                      and arrays[key].shape[0] != manifest["rows"]):
      raise InputError(f"expected {manifest['rows']} rows of {np.dtype(dtype)}, found "
                       f"{arrays[key].shape} {arrays[key].dtype}", path=path)
  return TokenCorpus(ids=np.array(arrays["ids"]), doc_inputs=arrays["tokens"],
                     body_bounds=arrays["body"], chars=arrays["chars"], text=arrays["text"],
                     text_at=arrays["text_at"], max_body_len=int(manifest["max_body_len"]),
                     max_title_len=int(manifest["max_title_len"]))


def ensure(folder, fingerprint: dict[str, Any],
           make_rows: Callable[[], Iterable[BlockRow]], *, block_len: int) -> TokenCorpus:
  """The token files of `folder`, (re)written from `make_rows()` when absent, stale, truncated
  or damaged (the reason goes to stderr: a rebuild at paper scale takes a while)."""
  try:
    return open_corpus(folder, fingerprint)
  except InputError as e:
    if Path(folder, MANIFEST).exists() or any(Path(folder, f[0]).exists() for f in FILES.values()):
      sys.stderr.write(f"rebuilding the corpus token file: {e}\n")
  write(folder, make_rows(), block_len=block_len, fingerprint=fingerprint)
  return open_corpus(folder, fingerprint, verify=False)


def load(task_name: str, block_len: int, folder) -> TokenCorpus:
  """The corpus task's blocks as a `TokenCorpus` in `folder`, tokenised there once."""
  fingerprint = source_fingerprint(task_name, block_len)
  return ensure(folder, fingerprint, lambda: task_rows(task_name, block_len),
                block_len=block_len)


def shared_name(fingerprint: dict[str, Any]) -> str:
  """A corpus's folder in a shared one: the task, the block length and a hash of the whole
  fingerprint, so corpora, vocabularies and lengths never share files."""
  key = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]
  task = "".join(c if c.isalnum() or c in "._-" else "_" for c in str(fingerprint["task"]))
  return f"{task}-{fingerprint['block_len']}-{key}"


def ensure_shared(root, fingerprint: dict[str, Any],
                  make_rows: Callable[[], Iterable[BlockRow]], *, block_len: int) -> TokenCorpus:
  """The token files of this corpus in the shared folder `root`, made once for every run.

  They are written into a temporary folder of this process's and renamed into place whole,
  so runs that start together never read each other's half-written files: each finds the
  finished folder or makes its own, and the first rename wins. A damaged folder is replaced."""
  root = Path(root)
  folder = root / shared_name(fingerprint)
  try:
    return open_corpus(folder, fingerprint)
  except InputError as e:
    if folder.exists():
      sys.stderr.write(f"rebuilding the shared corpus token file: {e}\n")
  root.mkdir(parents=True, exist_ok=True)
  tmp = root / f".{folder.name}.{os.getpid()}.tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  write(tmp, make_rows(), block_len=block_len, fingerprint=fingerprint)
  try:
    os.rename(tmp, folder)
  except OSError:   # the folder exists: another run's, finished meanwhile, or the damaged one
    try:
      corpus = open_corpus(folder, fingerprint)
    except InputError:
      shutil.rmtree(folder)
      os.rename(tmp, folder)
    else:
      shutil.rmtree(tmp)
      return corpus
  return open_corpus(folder, fingerprint, verify=False)


@gin.configurable
def shared_folder(path=None) -> Path | None:
  """The folder every run's token files are shared in (macro CORPUS_TOKENS_DIR); None: each
  run keeps its own under its folder."""
  return None if path is None else Path(path).expanduser()


def for_run(task_name: str, block_len: int, run_dir) -> TokenCorpus:
  """`load` into the run's folder, or the shared folder when one is set. In a multi-process
  run process 0 writes the files before the others look (they would otherwise see
  half-written files and rewrite them)."""
  from realm_bench import distributed  # pylint: disable=g-import-not-at-top
  shard = distributed.DataShard.of_this_process()
  if shard.index > 0:
    distributed.barrier("corpus-tokens")
  shared = shared_folder()
  if shared is None:
    corpus = load(task_name, block_len, Path(run_dir) / FOLDER)
  else:
    corpus = ensure_shared(shared, source_fingerprint(task_name, block_len),
                           lambda: task_rows(task_name, block_len), block_len=block_len)
  if shard.index == 0 and shard.num_shards > 1:
    distributed.barrier("corpus-tokens")
  return corpus
