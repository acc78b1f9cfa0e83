"""Embedding a whole corpus into sharded files on disk, in bounded memory, resumably.

At paper scale the corpus is 13,353,718 blocks of 288 wordpieces and its embeddings are
13.35M x 128 float32 = 6.8 GB: neither the tokenised blocks nor the embeddings should be held
in memory while a model is also loaded. So blocks stream from the seqio corpus task in fixed
batches (one compilation), each `shard_rows` embeddings go to `shard-NNNNN.npy` (+ `.ids.npy`)
under a temporary name and are renamed when complete, and a restarted job counts its complete
shards, skips that many blocks of the stream and carries on. `job.json` holds the job's
fingerprint (checkpoint, step, corpus, shapes): shards of a different job are never mixed in.
`assemble` concatenates the shards into one memory-mapped `.npy`, which index builders read
without a second in-memory copy.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_path, atomic_write_json

JOB = "job.json"


def corpus_batches(corpus_task: str, *, batch_size: int, block_len: int,
                   skip_rows: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
  """(ids [b], inputs [b, block_len]) from a seqio corpus task's blocks, in file order."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  task = seqio.get_mixture_or_task(corpus_task)
  dataset = task.get_dataset(sequence_length={"inputs": block_len}, split="train",
                             shuffle=False, num_epochs=1, use_cached=False)
  if skip_rows:
    dataset = dataset.skip(skip_rows)
  ids, rows = [], []
  for example in dataset.as_numpy_iterator():
    ids.append(int(example["id"]))
    rows.append(example["inputs"])
    if len(ids) == batch_size:
      yield np.asarray(ids, np.int64), _pad(rows, block_len)
      ids, rows = [], []
  if ids:
    yield np.asarray(ids, np.int64), _pad(rows, block_len)


def _pad(rows, length: int) -> np.ndarray:
  out = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    if len(r) > length:   # the task was built for another block length
      raise InputError(f"a block of {len(r)} wordpieces does not fit the block length {length}")
    out[i, :len(r)] = r
  return out


class _Progress:
  """`embedded 12,800 / 13,353,718 blocks  1,850 blocks/s  ETA 2h00m` on one stderr line."""

  def __init__(self, total: int | None, done: int, enabled: bool):
    self.total, self.start_done, self.enabled = total, done, enabled
    self.clock = time.perf_counter()
    self.tty = sys.stderr.isatty()
    self.last = 0.0

  def show(self, done: int, final: bool = False) -> None:
    now = time.perf_counter()
    if not self.enabled or (not final and now - self.last < (0.5 if self.tty else 30.0)):
      return
    self.last = now
    rate = (done - self.start_done) / max(now - self.clock, 1e-9)
    text = f"embedded {done:,}" + (f" / {self.total:,}" if self.total else "") + " blocks"
    text += f"  {rate:,.0f} blocks/s"
    if self.total and rate > 0 and done < self.total:
      eta = (self.total - done) / rate
      text += f"  ETA {int(eta // 3600)}h{int(eta % 3600 // 60):02d}m{int(eta % 60):02d}s"
    end = "\n" if final or not self.tty else ""
    sys.stderr.write(("\r" if self.tty else "") + text + end)
    sys.stderr.flush()


def _shard_paths(out_dir: Path, index: int) -> tuple[Path, Path]:
  return out_dir / f"shard-{index:05d}.npy", out_dir / f"shard-{index:05d}.ids.npy"


def complete_shards(out_dir) -> list[int]:
  """Indices of the shards whose embeddings and ids were both written (renamed into place)."""
  out_dir = Path(out_dir)
  done = []
  while all(p.exists() for p in _shard_paths(out_dir, len(done))):
    done.append(len(done))
  return done


def save_npy(path, array: np.ndarray) -> None:
  """`np.save` under a temporary name, renamed when complete."""
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f:
      np.save(f, np.asarray(array))
      f.flush()
      os.fsync(f.fileno())


def embed_to_shards(*, embed_fn: Callable[[np.ndarray], np.ndarray],
                    make_batches: Callable[[int], Iterator[tuple[np.ndarray, np.ndarray]]],
                    out_dir, fingerprint: dict[str, Any], batch_size: int,
                    shard_rows: int = 1 << 16, total: int | None = None,
                    progress: bool = False) -> int:
  """Embeds every batch `make_batches(skip_rows)` yields into shards; returns the row count.

  `embed_fn` maps inputs [batch_size, L] to [batch_size, D]; a short last batch is padded to
  `batch_size` so the function compiles once. Complete shards of the same job are kept and
  their rows skipped, so a killed job loses at most one shard of work.
  """
  if shard_rows % batch_size:
    raise InputError(f"shard_rows ({shard_rows}) must be a multiple of the batch size "
                     f"({batch_size})", field="shard_rows")
  out_dir = Path(out_dir)
  out_dir.mkdir(parents=True, exist_ok=True)
  job_path = out_dir / JOB
  fingerprint = json.loads(json.dumps(fingerprint))
  if job_path.exists():
    saved = json.loads(job_path.read_text())
    if saved.get("fingerprint") != fingerprint:
      raise InputError(f"the folder holds embeddings of a different job ({saved.get('fingerprint')}"
                       f"); remove it or choose another folder", path=job_path,
                       field="fingerprint")
    if saved.get("finished"):
      return int(saved["rows"])
  else:
    atomic_write_json(job_path, {"fingerprint": fingerprint, "finished": False})
  shards = complete_shards(out_dir)
  for stale in out_dir.glob(".shard-*.tmp"):
    stale.unlink()
  rows_done = sum(np.load(_shard_paths(out_dir, i)[1], mmap_mode="r").shape[0] for i in shards)
  if shards and rows_done != len(shards) * shard_rows:
    # Only the last shard of a corpus is short; a short one means the corpus has been embedded.
    atomic_write_json(job_path, {"fingerprint": fingerprint, "finished": True,
                                 "rows": rows_done, "shards": len(shards)})
    return rows_done
  bar = _Progress(total, rows_done, progress)
  next_shard, ids_buf, emb_buf, buffered = len(shards), [], [], 0
  for ids, inputs in make_batches(rows_done):
    n = ids.shape[0]
    if n < batch_size:
      inputs = np.concatenate([inputs, np.zeros((batch_size - n,) + inputs.shape[1:],
                                                inputs.dtype)])
    emb_buf.append(np.asarray(embed_fn(inputs), np.float32)[:n])
    ids_buf.append(ids)
    buffered += n
    rows_done += n
    if buffered >= shard_rows:
      _write_shard(out_dir, next_shard, emb_buf, ids_buf)
      next_shard, ids_buf, emb_buf, buffered = next_shard + 1, [], [], 0
    bar.show(rows_done)
  if buffered:
    _write_shard(out_dir, next_shard, emb_buf, ids_buf)
    next_shard += 1
  bar.show(rows_done, final=True)
  atomic_write_json(job_path, {"fingerprint": fingerprint, "finished": True, "rows": rows_done,
                               "shards": next_shard})
  return rows_done


def _write_shard(out_dir: Path, index: int, emb_buf, ids_buf) -> None:
  emb_path, ids_path = _shard_paths(out_dir, index)
  save_npy(ids_path, np.concatenate(ids_buf))
  save_npy(emb_path, np.concatenate(emb_buf))   # written last: it marks the shard complete


def assemble(out_dir, dest) -> tuple[np.ndarray, np.ndarray]:
  """All shards as one memory-mapped [N, D] float32 `.npy` at `dest` (written under a temporary
  name, shard by shard), plus the ids in memory (8 bytes a block)."""
  out_dir, dest = Path(out_dir), Path(dest)
  job_path = out_dir / JOB
  job = json.loads(job_path.read_text()) if job_path.exists() else {}
  if not job.get("finished"):
    raise InputError("the corpus embedding has not finished; rerun the job to complete it",
                     path=job_path, field="finished")
  shards = complete_shards(out_dir)
  if len(shards) != job["shards"]:
    raise InputError(f"expected {job['shards']} shards, found {len(shards)}", path=out_dir)
  parts = [np.load(_shard_paths(out_dir, i)[0], mmap_mode="r") for i in shards]
  ids = np.concatenate([np.load(_shard_paths(out_dir, i)[1]) for i in shards])
  dim = parts[0].shape[1] if parts else 0
  with atomic_path(dest) as tmp:
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32,
                                    shape=(ids.shape[0], dim))
    row = 0
    for part in parts:
      out[row:row + part.shape[0]] = part
      row += part.shape[0]
    out.flush()
    del out
  return np.load(dest, mmap_mode="r"), ids
