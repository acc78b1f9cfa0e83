"""ScaNN's recall / speed frontier at one batch size, against `ExactIndex` in the same run.

`mips.py` times the default searcher and a few search-time settings around it; this script
asks the question behind the batch-128 target (recall@10 >= 0.99 at >= 20x the exact index's
queries/s): is there any setting that meets it? It builds one searcher per leaf count
(`--num_leaves`; the default rule is sqrt(rows)) and, on each, searches a share of the leaves
(`--search_shares`) with a few re-ranking sizes (`--reorders`) and per-thread chunk sizes
(`--chunks`: how `search_batched_parallel` splits a batch over the search threads). Every
point's recall@10 is measured on held-out queries against a numpy exact top-k, and its
queries/s in rounds that take turns with `ExactIndex` at the same batch size (best round
each), so a ratio is always between two figures timed under the same load. The printout ends
with the Pareto frontier (no other point has both higher recall and higher speed-up) and the
target line.

Data: the clustered mixture of `mips.py` (`--rows_per_cluster`, `--spread`).

  python benchmarks/scann_frontier.py [--rows 1000000] [--batch 128]
      [--num_leaves 500,1000,2000,4000] [--search_shares 0.0125,0.025,0.05,0.1] [--reorders 40,100]
      [--chunks 0,16] [--rounds 3] [--min_seconds 1] [--spread 0.5]
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
import sys
import time
from typing import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # pylint: disable=g-import-not-at-top

from mips import RECALL_TARGET, SPEEDUP_TARGET, all_ids, clustered, queries_per_second  # pylint: disable=g-import-not-at-top
from realm_bench.retrieval.index import ExactIndex, exact_top_k  # pylint: disable=g-import-not-at-top
from realm_bench.retrieval.scann_index import ScannIndex, recall_at_k  # pylint: disable=g-import-not-at-top


@dataclasses.dataclass
class Point:
  num_leaves: int
  leaves_to_search: int
  reorder: int
  chunk: int          # queries per search thread; 0 = the batch split evenly (ScannIndex's rule)
  build_s: float
  recall: float
  qps: float = 0.0
  exact_qps: float = 0.0

  @property
  def speedup(self) -> float:
    return self.qps / self.exact_qps

  def setting(self) -> str:
    chunk = "even" if self.chunk == 0 else str(self.chunk)
    return (f"leaves {self.leaves_to_search}/{self.num_leaves}, reorder {self.reorder}, "
            f"chunk {chunk}")


def _search_fn(index: ScannIndex, params, chunk: int):
  """Search with the given search-time parameters and per-thread chunk size."""

  def search(queries, k):
    index.params = params
    if chunk == 0 or queries.shape[0] <= 1 or params.search_threads <= 1:
      return index.search(queries, k)
    rows, scores = index._searcher.search_batched_parallel(  # pylint: disable=protected-access
        np.ascontiguousarray(queries, np.float32), final_num_neighbors=k,
        leaves_to_search=params.leaves_to_search,
        pre_reorder_num_neighbors=max(params.reorder_num_neighbors, k), batch_size=chunk)
    return np.asarray(scores, np.float32), index.ids[np.asarray(rows, np.int64)]

  return search


def frontier(points: list[Point]) -> list[Point]:
  """The points no other point beats on both recall and speed-up, by recall."""
  keep = [p for p in points
          if not any(q.recall >= p.recall and q.speedup > p.speedup
                     or q.recall > p.recall and q.speedup >= p.speedup for q in points)]
  return sorted(keep, key=lambda p: p.recall)


def _table(points: list[Point]) -> list[str]:
  lines = ["| leaves searched / leaves | reorder | chunk | build s | recall@10 | queries/s "
           "| exact q/s | x exact |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
  for p in points:
    lines.append(f"| {p.leaves_to_search}/{p.num_leaves} | {p.reorder} | "
                 f"{'even' if p.chunk == 0 else p.chunk} | {p.build_s:.1f} | {p.recall:.4f} | "
                 f"{p.qps:.0f} | {p.exact_qps:.0f} | {p.speedup:.1f} |")
  return lines


def _list(text: str, flag: str, kind):
  try:
    values = [kind(v) for v in text.split(",") if v.strip()]
  except ValueError:
    raise SystemExit(f"{flag}: expected a comma list of {kind.__name__}, got {text!r}") from None
  if not values or min(values) < 0:
    raise SystemExit(f"{flag}: expected non-negative values, got {text!r}")
  return values


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  p.add_argument("--rows", type=int, default=1_000_000)
  p.add_argument("--dim", type=int, default=128)
  p.add_argument("--batch", type=int, default=128)
  p.add_argument("--queries", type=int, default=1000)
  p.add_argument("--num_leaves", default="500,1000,2000,4000")
  p.add_argument("--search_shares", default="0.0125,0.025,0.05,0.1",
                 help="shares of the leaves searched")
  p.add_argument("--reorders", default="40,100", help="re-ranked candidates per query")
  p.add_argument("--chunks", default="0,16",
                 help="queries per search thread (0: the batch split evenly over the threads)")
  p.add_argument("--rounds", type=int, default=3)
  p.add_argument("--min_seconds", type=float, default=1.0)
  p.add_argument("--spread", type=float, default=0.5)
  p.add_argument("--rows_per_cluster", type=int, default=100)
  p.add_argument("--seed", type=int, default=0)
  args = p.parse_args(argv)
  args.num_leaves = _list(args.num_leaves, "--num_leaves", int)
  args.search_shares = _list(args.search_shares, "--search_shares", float)
  args.reorders = _list(args.reorders, "--reorders", int)
  args.chunks = _list(args.chunks, "--chunks", int)
  if min(args.num_leaves) < 1 or not all(0 < s <= 1 for s in args.search_shares):
    raise SystemExit("--num_leaves must be positive and --search_shares in (0, 1]")
  if args.batch < 1 or args.batch > args.queries:
    raise SystemExit("--batch: must be between 1 and --queries")
  return args


def main(argv: Sequence[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  command = f"python benchmarks/scann_frontier.py {shlex.join(argv)}".rstrip()
  print(f"command: {command}", flush=True)
  load_start = os.getloadavg()[0]
  db, queries = clustered(args.rows, args.queries, dim=args.dim,
                          rows_per_cluster=args.rows_per_cluster, spread=args.spread,
                          seed=args.seed)
  ids = np.arange(args.rows)
  _, truth = exact_top_k(db, queries, 10)
  exact = ExactIndex()
  exact.build(db, ids)

  points: list[Point] = []
  for num_leaves in args.num_leaves:
    index = ScannIndex(num_leaves=num_leaves)
    clock = time.perf_counter()
    index.build(db, ids, held_out_queries=queries[:128])
    build_s = time.perf_counter() - clock
    base = index.params
    group, searches = [], []
    for share in args.search_shares:
      leaves = min(num_leaves, max(1, math.ceil(share * num_leaves)))
      for reorder in args.reorders:
        params = dataclasses.replace(base, leaves_to_search=leaves, reorder_num_neighbors=reorder)
        for chunk in args.chunks:
          search = _search_fn(index, params, chunk)
          recall = recall_at_k(all_ids(search, queries, 10, args.batch), truth)
          group.append(Point(num_leaves, leaves, reorder, chunk, build_s, recall))
          searches.append(search)
    # The same rounds time the exact index: each point's ratio is to the exact figure of its
    # own group, timed between the same builds under the same load.
    best = [0.0] * (len(group) + 1)
    for _ in range(args.rounds):
      for i, search in enumerate([exact.search] + searches):
        best[i] = max(best[i], queries_per_second(search, queries, args.batch, 10,
                                                  args.min_seconds))
    for point, qps in zip(group, best[1:]):
      point.qps, point.exact_qps = qps, best[0]
      print(_table([point])[-1], flush=True)
    points += group
    del index

  print()
  print(f"command: `{command}`")
  print(f"load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}, on "
        f"{os.cpu_count()} CPUs; {args.rows:,} x {args.dim} clustered rows "
        f"({args.rows_per_cluster} per centre, spread {args.spread}), batch {args.batch}, "
        f"{args.queries} held-out queries")
  print()
  print("\n".join(_table(points)))
  print()
  print("Pareto frontier (recall@10 vs x exact):")
  print("\n".join(_table(frontier(points))))
  print()
  meeting = [p for p in points if p.recall >= RECALL_TARGET]
  if meeting:
    top = max(meeting, key=lambda p: p.speedup)
    ok = top.speedup >= SPEEDUP_TARGET
    print(f"{'PASS' if ok else 'FAIL'}: {args.rows:,} rows, batch {args.batch}: fastest setting "
          f"with recall@10 >= {RECALL_TARGET}: [{top.setting()}] recall {top.recall:.4f}, "
          f"{top.speedup:.1f}x ExactIndex (target >= {SPEEDUP_TARGET:.0f}x)")
  else:
    print(f"FAIL: {args.rows:,} rows, batch {args.batch}: no setting reaches recall@10 >= "
          f"{RECALL_TARGET}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
