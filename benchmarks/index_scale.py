"""A ScaNN index over paper-scale rows (13,353,718 x 128 float32 = 6.8 GB) in bounded memory.

The rows are seeded N(0, I) by default: random rows are the hard case for a partitioned index,
since no cluster structure lets a query's neighbours sit in few leaves. Real embeddings have
such structure (topics, entities), so `--rows_per_cluster N --spread S` draws the rows, and the
queries, from a Gaussian mixture instead (one N(0, I) centre per N rows, each row its centre
plus N(0, S^2 I); `mips.py`'s data at any size). Either way the rows are written in chunks
straight into an on-disk .npy (`open_memmap`), so generating them never holds more than one
chunk.
`ScannIndex.build` reads that memmap in place; ScaNN copies the rows into its own C++ dataset
(kept for float32 re-ranking) and, while it trains and hashes, holds about one more buffer of
the same size, so the build peaks near twice the rows in anonymous memory whatever the
re-ranking precision; `--reorder_dtype int8` shrinks what stays resident after the build.
Recall@10 is measured on held-out queries (fresh draws from the rows' distribution) against an
exact top-k computed in chunks over the memmap (`exact_top_k`), inside the build; the same
ground truth, computed once more here, times exact search and scores a few wider searches
(2x and 4x `leaves_to_search`) on the same index.

Memory figures: ru_maxrss is the peak resident set, which counts the memmap's file pages the
build touched; those are page cache the kernel drops under pressure, so the figure that must
fit the machine is the peak anonymous RSS (RssAnon, sampled every 10 ms), reported beside it.
With `--save` (the default) the index is saved, dropped, loaded back (deserialising ScaNN's
searcher, not rebuilding it) and checked to return the same neighbours.

  python benchmarks/index_scale.py [--rows 13353718] [--dim 128] [--work_dir /tmp]
      [--queries 1000] [--reorder_dtype float32] [--no_save] [--keep]
      [--rows_per_cluster 0] [--spread 0.5]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import resource
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top
from numpy.lib.format import open_memmap  # pylint: disable=g-import-not-at-top

from realm_bench.retrieval.index import exact_top_k, load_index  # pylint: disable=g-import-not-at-top
from realm_bench.retrieval.scann_index import (  # pylint: disable=g-import-not-at-top
    REORDER_DTYPES, ScannIndex, recall_at_k)

PAPER_ROWS = 13_353_718
GIB = 2 ** 30


def _status_bytes(field: str) -> int:
  with open("/proc/self/status", encoding="ascii") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) * 1024
  return 0


class AnonPeak:
  """Samples RssAnon (private memory: not the memmap's page cache) on a thread."""

  def __init__(self, interval: float = 0.01):
    self.interval = interval
    self.peak = _status_bytes("RssAnon")
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._sample, daemon=True)
    self._thread.start()

  def _sample(self):
    while not self._stop.wait(self.interval):
      self.peak = max(self.peak, _status_bytes("RssAnon"))

  def mark(self) -> float:
    """Peak since the last mark, in GiB; starts a new interval."""
    peak = max(self.peak, _status_bytes("RssAnon"))
    self.peak = _status_bytes("RssAnon")
    return peak / GIB

  def stop(self):
    self._stop.set()
    self._thread.join()


def _max_rss_gib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def draw(n: int, dim: int, rng: np.random.Generator, centres: np.ndarray | None,
         spread: float) -> np.ndarray:
  """n rows: N(0, I), or a centre plus N(0, spread^2 I) when `centres` are given."""
  if centres is None:
    return rng.standard_normal((n, dim), np.float32)
  out = centres[rng.integers(len(centres), size=n)]
  out += spread * rng.standard_normal((n, dim), np.float32)
  return out


def mixture_centres(rows: int, dim: int, *, rows_per_cluster: int, seed: int):
  """The Gaussian mixture's N(0, I) centres (None: unclustered N(0, I) rows)."""
  if not rows_per_cluster:
    return None
  rng = np.random.default_rng([seed, 1])
  return rng.standard_normal((max(rows // rows_per_cluster, 1), dim), np.float32)


def write_rows(path: Path, rows: int, dim: int, *, chunk_rows: int, seed: int,
               centres: np.ndarray | None = None, spread: float = 0.0) -> np.ndarray:
  """Seeded rows written chunk by chunk into an .npy; returns it read-only mapped."""
  out = open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, dim))
  rng = np.random.default_rng(seed)
  for start in range(0, rows, chunk_rows):
    m = min(chunk_rows, rows - start)
    out[start:start + m] = draw(m, dim, rng, centres, spread)
  out.flush()
  del out
  return np.load(path, mmap_mode="r")


def _qps(index, queries: np.ndarray, batch: int, min_seconds: float) -> float:
  index.search(queries[:batch], 10)
  done, clock = 0, time.perf_counter()
  while True:
    for start in range(0, queries.shape[0] - batch + 1, batch):
      index.search(queries[start:start + batch], 10)
      done += batch
      if time.perf_counter() - clock >= min_seconds:
        return done / (time.perf_counter() - clock)


def _du(path: Path) -> int:
  seen, total = set(), 0
  for f in path.rglob("*"):
    st = f.stat()
    if f.is_file() and st.st_ino not in seen:
      seen.add(st.st_ino)
      total += st.st_size
  return total



def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  p.add_argument("--rows", type=int, default=PAPER_ROWS)
  p.add_argument("--dim", type=int, default=128)
  p.add_argument("--work_dir", default=tempfile.gettempdir(),
                 help="where the temporary folder with the .npy (and the saved index) goes")
  p.add_argument("--queries", type=int, default=1000, help="held-out queries for recall@10")
  p.add_argument("--reorder_dtype", default="float32", choices=sorted(REORDER_DTYPES),
                 help="precision of ScaNN's re-ranking copy (int8: a quarter of the RAM)")
  p.add_argument("--chunk_rows", type=int, default=1 << 20)
  p.add_argument("--min_seconds", type=float, default=3.0, help="timing per batch size")
  p.add_argument("--no_save", action="store_true", help="skip the save / load round trip")
  p.add_argument("--keep", action="store_true", help="keep the temporary folder")
  p.add_argument("--rows_per_cluster", type=int, default=0,
                 help="clustered rows: one N(0, I) centre per this many rows (0: N(0, I) rows)")
  p.add_argument("--spread", type=float, default=0.5,
                 help="with --rows_per_cluster: each row is its centre + N(0, spread^2 I)")
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  if args.rows_per_cluster < 0 or args.spread <= 0:
    raise SystemExit("--rows_per_cluster must be >= 0 and --spread positive")
  if args.rows < 1 or args.dim < 1 or args.queries < 128 or args.chunk_rows < 1:
    raise SystemExit("--rows, --dim, --chunk_rows must be positive and --queries >= 128")
  return args


def main(argv: Sequence[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  command = f"python benchmarks/index_scale.py {shlex.join(argv)}".rstrip()
  need = args.rows * args.dim * 4 * (2 if not args.no_save else 1)
  free = shutil.disk_usage(args.work_dir).free
  if free < need * 1.1:
    raise SystemExit(f"--work_dir {args.work_dir}: {free / GIB:.1f} GiB free, "
                     f"need about {need * 1.1 / GIB:.1f} GiB")
  print(f"command: {command}", flush=True)
  load_start = os.getloadavg()[0]
  print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"{os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / GIB:.1f} GiB RAM; load "
        f"average at start {load_start:.2f}", flush=True)
  work = Path(tempfile.mkdtemp(prefix="index_scale.", dir=args.work_dir))
  anon = AnonPeak()
  results = [("RssAnon after imports (GiB)", f"{_status_bytes('RssAnon') / GIB:.2f}")]

  def report(*entries):
    results.extend(entries)
    for what, value in entries:
      print(f"{what}: {value}", flush=True)

  try:
    clock = time.perf_counter()
    centres = mixture_centres(args.rows, args.dim, rows_per_cluster=args.rows_per_cluster,
                              seed=args.seed)
    rows = write_rows(work / "rows.npy", args.rows, args.dim, chunk_rows=args.chunk_rows,
                      seed=args.seed, centres=centres, spread=args.spread)
    report(("rows written to the .npy memmap (s)", f"{time.perf_counter() - clock:.1f}"),
           ("peak RssAnon while writing (GiB)", f"{anon.mark():.2f}"))
    queries = draw(args.queries, args.dim, np.random.default_rng(args.seed + 1), centres,
                   args.spread)
    clock = time.perf_counter()
    _, truth = exact_top_k(rows, queries, 10)
    exact_seconds = time.perf_counter() - clock
    report(("exact top-k in chunks over the memmap (numpy), queries/s",
            f"{args.queries / exact_seconds:.1f}"),
           ("peak RssAnon during exact top-k (GiB)", f"{anon.mark():.2f}"))

    index = ScannIndex(reorder_dtype=args.reorder_dtype)
    index.build(rows, np.arange(args.rows), held_out_queries=queries)
    m = index.manifest
    report(("ScannIndex build: tree + hashing (s)", f"{m['index_build_seconds']:.1f}"),
           ("recall check inside build: exact top-k + ScaNN search (s)",
            f"{m['recall_seconds']:.1f}"),
           (f"recall@10, {m['recall_queries']} held-out queries (manifest)",
            f"{m['recall@10']:.4f}"),
           ("peak RssAnon during build + recall check (GiB)", f"{anon.mark():.2f}"),
           ("RssAnon after the build (GiB)", f"{_status_bytes('RssAnon') / GIB:.2f}"),
           ("ru_maxrss so far (GiB; counts the memmap's page cache)", f"{_max_rss_gib():.2f}"))
    print(f"parameters: {m['scann']}", flush=True)
    default = index.params
    for leaves in sorted({default.leaves_to_search, 2 * default.leaves_to_search,
                          4 * default.leaves_to_search}):
      index.params = dataclasses.replace(default, leaves_to_search=min(leaves,
                                                                       default.num_leaves))
      recall = recall_at_k(index.search(queries, 10)[1], truth)
      label = f"leaves {index.params.leaves_to_search}/{default.num_leaves}"
      report((f"{label}: recall@10", f"{recall:.4f}"),
             *[(f"{label}: queries/s, batch {batch}",
                f"{_qps(index, queries, batch, args.min_seconds):.1f}") for batch in (1, 128)])
    index.params = default

    if not args.no_save:
      want = index.search(queries[:128], 10)
      clock = time.perf_counter()
      path = index.save(work / "index")
      report(("save (s)", f"{time.perf_counter() - clock:.1f}"),
             ("saved folder (GiB, the hard-linked re-ranking rows counted once)",
              f"{_du(path) / GIB:.2f}"))
      del index
      anon.mark()
      clock = time.perf_counter()
      loaded = load_index(path)
      report(("load: checksum + deserialise, no training (s)",
              f"{time.perf_counter() - clock:.1f}"),
             ("loaded index returns the same neighbours",
              str(np.array_equal(loaded.search(queries[:128], 10)[1], want[1]))),
             ("peak RssAnon during load (GiB)", f"{anon.mark():.2f}"))
      del loaded
  finally:
    anon.stop()
    if not args.keep:
      shutil.rmtree(work, ignore_errors=True)

  print()
  print(f"command: `{command}`")
  print(f"load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}, "
        f"on {os.cpu_count()} CPUs; ru_maxrss {_max_rss_gib():.2f} GiB")
  rows_kind = (f"clustered ({args.rows_per_cluster} per N(0, I) centre, spread {args.spread})"
               if args.rows_per_cluster else "N(0, I)")
  print(f"{args.rows:,} x {args.dim} float32 {rows_kind} = "
        f"{args.rows * args.dim * 4 / GIB:.2f} GiB; reorder_dtype {args.reorder_dtype}")
  print()
  print("| measure | value |")
  print("|---|---:|")
  for what, value in results:
    print(f"| {what} | {value} |")
  return 0


if __name__ == "__main__":
  sys.exit(main())
