"""The asynchronous refresh: a builder process that keeps the index fresh as REALM trains.

The paper's system runs two jobs: the trainer, and an index builder that takes the newest
retriever parameters, re-embeds the corpus and rebuilds the MIPS index, while the trainer keeps
going on the previous index. Here:

  trainer (AsyncRefresher, run by IndexRefreshHook)  builder process (serve)
  every refresh_every_steps: export the          watch checkpoints/embedder/ for a newer
  document tower to checkpoints/embedder/   ->   export; embed the tokenised corpus (which the
                                                 trainer wrote to index/corpus/ at start) in
                                                 resumable shards;
                                                 build the index; write index/vNNNNNNNN under a
  between steps: is there a new LATEST?     <-   temporary name, rename, move LATEST.
  a loader thread has read it; swap.

The trainer never waits except for the very first index (and on resume, if the checkpoint's
index version has been pruned). A resumed run first discards the versions and exports made after
its restored step by the run that was killed (they come from parameters the resumed run will
never have), and only then starts the builder, so nothing newer than the restored step is ever
searched; a builder cleans up the unfinished work of the one before it when it starts. If the
builder dies, training continues on the last good index and the builder is restarted (at most
`max_builder_restarts` times); a builder whose trainer has gone (even killed with SIGKILL)
notices that its parent changed and exits; the trainer removes old versions (keeping `keep`,
the version in use and the one its newest checkpoint names) and exports older than the index in
use.

Which parameters an index was embedded with is its manifest's `embedder_step`; a step's
staleness is `train_step - embedder_step`, and the refresh rule is `refresh.refresh_due`, as in
the synchronous mode.

Across processes: `sharded_async_refresh.ShardedAsyncRefresher`, one builder per host.
"""
from __future__ import annotations

import copy
import multiprocessing
import os
import shutil
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import flax.serialization
import numpy as np

from realm_bench import distributed
from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_bytes, atomic_write_text
from realm_bench.retrieval import corpus_embedding
from realm_bench.retrieval.embed import build_index
from realm_bench.retrieval.index import MipsIndex, load_index
from realm_bench.retrieval.refresh import (LATEST, Refresher, RefreshConfig,
                                           discard_versions_after, duration_stats,
                                           latest_version, prune_versions, version_name,
                                           write_version)
from realm_bench.retrieval.sharded_index import shard_name

EMBEDDER_DIR = Path("checkpoints") / "embedder"
CORPUS_DIR = "corpus"


# ------------------------------------------------------------------------------------------
# Document-tower exports: what the trainer hands the builder.
# ------------------------------------------------------------------------------------------

def export_embedder(export_dir, step: int, retriever_params) -> Path:
  """Writes the retriever's parameters as `step_NNNNNNNN.msgpack` (temporary name, renamed).

  Only the retriever is exported: it is all the builder needs, a fraction of a full
  checkpoint (no reader, no optimizer moments), and it is written at the refresh cadence,
  independent of how often the run checkpoints for preemption.
  """
  path = Path(export_dir) / f"step_{step:08d}.msgpack"
  atomic_write_bytes(path, flax.serialization.msgpack_serialize(
      {"retriever": _to_numpy(retriever_params)}))
  return path


def _to_numpy(tree):
  import jax  # pylint: disable=g-import-not-at-top
  return jax.tree.map(np.asarray, jax.device_get(tree))


def exports(export_dir) -> list[tuple[int, Path]]:
  """(step, path) of every complete export, oldest first."""
  out = []
  for path in Path(export_dir).glob("step_*.msgpack"):
    try:
      out.append((int(path.stem.split("_")[1]), path))
    except ValueError:
      continue
  return sorted(out)


def discard_exports_after(export_dir, step: int) -> list[int]:
  """Removes the exports of steps after `step` (a killed run's); returns their steps."""
  removed = []
  for export_step, path in exports(export_dir):
    if export_step > step:
      path.unlink(missing_ok=True)
      removed.append(export_step)
  return removed


def remove_unfinished_work(index_root, shard: int | None = None) -> list[str]:
  """Removes the dot-named folders and files a killed builder leaves in `index_root`: the
  `.work-vNNNNNNNN` embedding shards (6.8 GB each at paper scale) and half-saved versions.
  Only one builder runs at a time and the trainer writes there only before starting it.
  With `shard` (one builder per host), only that host's builder's leftovers: the other hosts'
  builders may be at work beside it."""
  removed = []
  if shard is None:
    leftovers = list(Path(index_root).glob(".*"))
  else:
    prefix = "." + shard_name(shard) + "."
    leftovers = [*Path(index_root).glob(prefix + "*"), *Path(index_root).glob(f"v*/{prefix}*")]
  for leftover in leftovers:
    if leftover.is_dir():
      _rmtree(leftover)
    else:
      leftover.unlink(missing_ok=True)
    removed.append(leftover.name)
  return sorted(removed)


def load_export(path) -> dict[str, Any]:
  return flax.serialization.msgpack_restore(Path(path).read_bytes())


# ------------------------------------------------------------------------------------------
# The builder process.
# ------------------------------------------------------------------------------------------

def write_corpus(index_root, ids: np.ndarray, inputs: np.ndarray) -> None:
  """The tokenised corpus the builder embeds, as `.npy` files it memory-maps: re-running the
  seqio pipeline (reading and tokenising every block) for each refresh would cost more than
  the embedding itself at small scale."""
  folder = Path(index_root) / CORPUS_DIR
  corpus_embedding.save_npy(folder / "ids.npy", ids)
  corpus_embedding.save_npy(folder / "inputs.npy", inputs)


def _corpus_batches(index_root: Path, batch_size: int, skip: int, parent_pid: int,
                    rows: tuple[int, int] | None = None):
  folder = index_root / CORPUS_DIR
  ids = np.load(folder / "ids.npy", mmap_mode="r")
  inputs = np.load(folder / "inputs.npy", mmap_mode="r")
  first, stop = (0, ids.shape[0]) if rows is None else rows
  for start in range(first + skip, stop, batch_size):
    if os.getppid() != parent_pid:   # a paper-scale embedding takes hours: do not outlive
      raise SystemExit("trainer has gone; builder exits mid-embedding")
    end = min(start + batch_size, stop)
    yield np.asarray(ids[start:end]), np.asarray(inputs[start:end])


def shard_pointer(index_root, shard: int) -> Path:
  """The file naming the newest version whose `shard` a per-host builder has finished."""
  return Path(index_root) / f"{shard_name(shard)}.{LATEST}"


def newest_shard_version(index_root, shard: int) -> Path | None:
  """The version folder of the newest finished `shard`, None before its first."""
  pointer = shard_pointer(index_root, shard)
  if not pointer.exists():
    return None
  path = Path(index_root) / pointer.read_text().strip()
  return path if (path / shard_name(shard) / "manifest.json").exists() else None


def serve(*, run_dir: str, config_text: str, model, index_prototype: MipsIndex,
          embed_batch_size: int, poll_seconds: float, parent_pid: int,
          shard: tuple[int, int] | None = None) -> None:
  """The builder's main loop (a spawned process): build an index from every newer export.

  `shard` (index, count): one builder per host, embedding only that host's `row_range` of the
  corpus into `vNNNNNNNN/shard_IIIII/` and naming it in its own pointer (`shard_pointer`).
  """
  run_dir = Path(run_dir)
  index_root = run_dir / "index"
  import gin  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  gin.parse_config(config_text)   # anything configurable the build calls is bound as in training
  embed = jax.jit(model.embed_docs)
  mine = None if shard is None else shard[0]
  rows = None
  if shard is not None:
    num_rows = np.load(index_root / CORPUS_DIR / "ids.npy", mmap_mode="r").shape[0]
    rows = distributed.row_range(num_rows, distributed.DataShard(*shard))
  built = _newest_built_step(index_root, mine)
  _log(f"builder started (pid {os.getpid()}, trainer {parent_pid}); newest index step {built}"
       + ("" if shard is None else f"; shard {shard[0]} of {shard[1]}, rows {rows}"))
  leftovers = remove_unfinished_work(index_root, mine)
  if leftovers:
    _log(f"removed the unfinished work of an earlier builder: {', '.join(leftovers)}")
  while os.getppid() == parent_pid:
    available = exports(run_dir / EMBEDDER_DIR)
    if not available or available[-1][0] <= built:
      time.sleep(poll_seconds)
      continue
    step, path = available[-1]
    try:
      params = load_export(path)
    except (OSError, ValueError) as e:   # pruned by the trainer meanwhile: take the next one
      _log(f"could not read {path.name}: {e}")
      continue
    if shard is None:
      work = index_root / f".work-{version_name(step)}"
      manifest = {"embedder_step": step, "builder": "async"}
      save = lambda built, s=step: write_version(built, index_root, s)
    else:
      work = index_root / f".{shard_name(mine)}.work-{version_name(step)}"
      manifest = {"embedder_step": step, "builder": "async", "row_range": list(rows)}
      save = lambda built, s=step: _write_shard(built, index_root, s, mine)
    _rmtree(work)
    index = build_index(
        embed_fn=lambda x, p=params: embed(p, x),
        index_factory=lambda: copy.deepcopy(index_prototype), manifest=manifest,
        make_batches=lambda skip: _corpus_batches(index_root, embed_batch_size, skip,
                                                  parent_pid, rows),
        work_dir=work, fingerprint={"step": step, **({} if rows is None else {"rows": rows})},
        batch_size=embed_batch_size,
        shard_rows=embed_batch_size * 256, save=save)
    _log(f"built {version_name(step)}: {index.num_blocks} blocks in "
         f"{index.manifest['build_seconds']:.2f} s")
    del index
    built = step
  _log("trainer has gone; builder exits")


def _write_shard(index: MipsIndex, index_root: Path, step: int, shard: int) -> Path:
  path = index.save(index_root / version_name(step) / shard_name(shard))
  atomic_write_text(shard_pointer(index_root, shard), version_name(step) + "\n")
  return path


def _newest_built_step(index_root: Path, shard: int | None = None) -> int:
  path = (latest_version(index_root) if shard is None
          else newest_shard_version(index_root, shard))
  return int(path.name[1:]) if path is not None else -1


def _rmtree(path: Path) -> None:
  shutil.rmtree(path, ignore_errors=True)


def _log(message: str) -> None:
  print(f"[builder {time.strftime('%H:%M:%S')}] {message}", flush=True)


def builder_log(index_root, shard: tuple[int, int] | None = None) -> Path:
  """Where a builder's output goes: one log per host's builder in a multi-process run."""
  name = "builder.log" if shard is None else f"builder.{shard_name(shard[0])}.log"
  return Path(index_root) / name


def _serve_guarded(**kwargs) -> None:
  """The spawned process's target: output goes to index/builder.log, errors end the process
  with a traceback there and a non-zero exit code the trainer sees."""
  index_root = Path(kwargs["run_dir"]) / "index"
  index_root.mkdir(parents=True, exist_ok=True)
  log_path = builder_log(index_root, kwargs.get("shard"))
  log = open(log_path, "a", buffering=1, encoding="utf-8")  # pylint: disable=consider-using-with
  os.dup2(log.fileno(), 1)
  os.dup2(log.fileno(), 2)
  sys.stdout = sys.stderr = log
  try:
    serve(**kwargs)
  except BaseException:  # the trainer sees the exit code; the log keeps the reason
    traceback.print_exc()
    sys.stdout.flush()
    raise


# ------------------------------------------------------------------------------------------
# The trainer's side.
# ------------------------------------------------------------------------------------------

class AsyncRefresher(Refresher):
  """The Refresher over a supervised builder process.

  `maybe_refresh(step, params)` runs between training steps: it exports the document tower
  when a refresh is due, restarts a dead builder, and swaps in an index the loader thread has
  already read from disk, so the step itself only pays for a pointer swap.
  """

  def __init__(self, *, run_dir, config: RefreshConfig, model, doc_ids: np.ndarray,
               doc_inputs: np.ndarray, index_prototype: MipsIndex, config_text: str):
    super().__init__(config)
    self.run_dir = Path(run_dir)
    self.index_root = self.run_dir / "index"
    self.export_dir = self.run_dir / EMBEDDER_DIR
    self._spawn_kwargs = dict(
        run_dir=str(self.run_dir), config_text=config_text, model=model,
        index_prototype=index_prototype,
        embed_batch_size=config.embed_batch_size, poll_seconds=config.poll_seconds,
        parent_pid=os.getpid())
    self._corpus = (doc_ids, doc_inputs)
    self.wait_seconds = 0.0                   # the trainer blocked for an index
    self.overhead_seconds = 0.0               # exports, supervision and swaps
    self.restarts = 0
    self._process = None
    self._pending: tuple[MipsIndex, Path] | None = None
    self._lock = threading.Lock()
    self._stop = threading.Event()
    self._loader = None

  # -- lifecycle ------------------------------------------------------------------------
  def start(self) -> None:
    """Writes the corpus; starts the builder now when the folder holds no versions or exports
    (a fresh run: it starts while the trainer compiles), else once the run's step is known
    (`restore` or the first `maybe_refresh`), after the killed run's newer ones are gone."""
    self.index_root.mkdir(parents=True, exist_ok=True)
    self.export_dir.mkdir(parents=True, exist_ok=True)
    remove_unfinished_work(self.index_root)
    write_corpus(self.index_root, *self._corpus)
    if not exports(self.export_dir) and not list(self.index_root.glob("v*")):
      self._launch(None)

  def _launch(self, step: int | None) -> None:
    """Starts the builder and the loader thread, first discarding what was made after `step`."""
    if self._loader is not None:
      return
    if step is not None:
      versions = discard_versions_after(self.index_root, step)
      steps = discard_exports_after(self.export_dir, step)
      if versions or steps:
        print(f"resuming at step {step}: discarded what the interrupted run made after it "
              f"(index versions {versions or 'none'}, document-tower exports of steps "
              f"{steps or 'none'})", file=sys.stderr)
    self._start_process()
    self._loader = threading.Thread(target=self._watch, name="index-loader", daemon=True)
    self._loader.start()

  def _start_process(self) -> None:
    context = multiprocessing.get_context("spawn")
    self._process = context.Process(target=_serve_guarded, kwargs=self._spawn_kwargs,
                                    name="realm-bench-index-builder", daemon=True)
    self._process.start()

  @property
  def log_path(self) -> Path:
    return builder_log(self.index_root, self._spawn_kwargs.get("shard"))

  @property
  def builder_pid(self) -> int | None:
    return self._process.pid if self._process is not None else None

  def close(self) -> None:
    """Stops the loader and the builder (called when training ends, however it ends)."""
    self._stop.set()
    if self._process is not None and self._process.is_alive():
      self._process.terminate()
      self._process.join(timeout=10)
      if self._process.is_alive():
        self._process.kill()
        self._process.join()
    if self._loader is not None:
      self._loader.join(timeout=10)

  # -- the loader thread ------------------------------------------------------------------
  def _watch(self) -> None:
    seen = None
    while not self._stop.wait(self.config.poll_seconds):
      path = latest_version(self.index_root)
      if path is None or path.name == seen:
        continue
      current = self.version_path.name if self.version_path is not None else None
      if path.name == current:
        seen = path.name
        continue
      try:
        index = load_index(path)
      except (OSError, ValueError, InputError) as e:   # pruned after LATEST named it: next poll
        print(f"index loader: could not read {path}: {e}", file=sys.stderr)
        continue
      with self._lock:
        self._pending = (index, path)
      seen = path.name

  # -- between steps ----------------------------------------------------------------------
  def maybe_refresh(self, step: int, params) -> bool:
    clock = time.perf_counter()
    self._launch(step)
    self._supervise()
    if self.due(step):
      self._export(step, params)
    if self.index is None:
      self._wait_for(step)
    swapped = self._swap()
    self.overhead_seconds += time.perf_counter() - clock
    return swapped

  def _export(self, step: int, params) -> None:
    export_embedder(self.export_dir, step, params["retriever"])
    self.last_refresh_step = step

  def _supervise(self) -> None:
    if self._process is None or self._process.is_alive():
      return
    code = self._process.exitcode
    if self.restarts >= self.config.max_builder_restarts:
      if self.restarts == self.config.max_builder_restarts:
        print(f"index builder died (exit code {code}) {self.restarts} times; training goes on "
              f"with {self.version_path.name if self.version_path else 'no index'}",
              file=sys.stderr)
        self.restarts += 1
      return
    self.restarts += 1
    print(f"index builder died (exit code {code}, see {self.log_path}); "
          f"restarting it ({self.restarts}/{self.config.max_builder_restarts}), training goes "
          f"on with {self.version_path.name if self.version_path else 'no index yet'}",
          file=sys.stderr)
    self._start_process()

  def _ready_step(self) -> int | None:
    """The embedder step of the newest index ready to swap in, None before one is."""
    with self._lock:
      pending = self._pending
    return None if pending is None else int(pending[0].manifest["embedder_step"])

  def _wait_for(self, step: int) -> None:
    """Blocks until an index embedded at `step` or later is loaded (first index, resume)."""
    clock = time.perf_counter()
    while True:
      ready = self._ready_step()
      if ready is not None and ready >= step:
        break
      self._supervise()
      if self.restarts > self.config.max_builder_restarts:
        raise RuntimeError(f"the index builder keeps dying; see {self.log_path}")
      time.sleep(self.config.poll_seconds / 4)
    self.wait_seconds += time.perf_counter() - clock

  def _swap(self) -> bool:
    with self._lock:
      pending, self._pending = self._pending, None
    if pending is None:
      return False
    self.index, self.version_path = pending
    self.durations.append(float(self.index.manifest.get("build_seconds", 0.0)))   # the builder's
    prune_versions(self.index_root, self.config.keep, {self.protected, self.version_path.name})
    for export_step, path in exports(self.export_dir):
      if export_step < self.embedder_step:
        path.unlink(missing_ok=True)
    return True

  # -- checkpoints ------------------------------------------------------------------------
  def restore(self, version: str | None, params, step: int) -> None:
    """Reloads the index the checkpoint was using, or waits for one built at `step`."""
    self._launch(step)
    if not self._reload(self.index_root / version if version else None):
      self._export(step, params)
      self._wait_for(step)
      self._swap()

  def _reload(self, path: Path | None) -> bool:
    """Searches the checkpoint's version `path` again if it is whole; False: rebuild it."""
    if path is None or not (path / "manifest.json").exists():
      return False
    self.index, self.version_path = load_index(path), path
    self.last_refresh_step = self.embedder_step
    return True

  def stats(self) -> dict:
    return {**duration_stats(self.durations),
            "refresh_mode": "async",
            "refresh_wait_seconds": round(self.wait_seconds, 4),
            "refresh_overhead_seconds": round(self.overhead_seconds, 4),
            "builder_restarts": self.restarts}
