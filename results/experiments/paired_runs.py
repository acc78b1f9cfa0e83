"""Two runs of each world, paired over the same questions, and the mean over the worlds.

  python results/experiments/paired_runs.py A B DIR_A[,DIR_B] [DIR_A[,DIR_B] ...]
  python results/experiments/paired_runs.py A B PAIR [PAIR ...] -- PAIR [PAIR ...] [-- ...]

A and B are record folder names (e.g. realm_recall_dev realm_stale30x_recall_dev); each
DIR_A[,DIR_B] argument is one pair: A is read from DIR_A, B from DIR_B (DIR_A when not given).
Prints A − B ± the SE of the per-question difference per pair, then the mean and its 95%
t-interval over the worlds, with the verdict it gives A > B (`claims.verdict`). Without `--`
each pair is a world; with it, `--` separates worlds and a world's pairs are its seeds: each
world then gets the mean over its seeds with their t-interval and verdict, and the last
line's interval is over the worlds' means (worlds, not seeds, are the units a recipe must hold
on).
"""
import sys
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError
from realm_bench.reporting import claims, stats, summary
from realm_bench.reporting.records import RECORD_NAME, read_record


def _pair(a: str, b: str, pair: str) -> float:
  dir_a, _, dir_b = pair.partition(",")
  paths = (Path(dir_a) / a / RECORD_NAME, Path(dir_b or dir_a) / b / RECORD_NAME)
  for path in paths:
    if not path.exists():
      raise InputError("no such record", path=path)
  found = summary.paired_difference(*(read_record(p) for p in paths))
  if found is None:
    raise InputError("the two records do not have outcomes over the same questions",
                     path=paths[0])
  print(f"{pair}: {a} − {b} {found[0]:+.1f} ± {found[1]:.1f}")
  return found[0]


def _over(values: list[float], what: str) -> str:
  """The 95% t-interval over `values` and the verdict it gives A > B, as printed."""
  iv = stats.t_interval(values, confidence=0.95, what=what)
  if iv is None:
    return ""
  return f" [{iv.low:+.1f}, {iv.high:+.1f}] ({iv.method}) {claims.verdict(iv.low, iv.high)}"


def main(a: str, b: str, worlds: list[list[str]]) -> None:
  means = []
  for pairs in worlds:
    values = [_pair(a, b, pair) for pair in pairs]
    means.append(float(np.mean(values)))
    if len(pairs) > 1:
      print(f"world mean of {len(values)} seeds {means[-1]:+.1f}{_over(values, 'seeds')}")
  print(f"mean {np.mean(means):+.1f}{_over(means, 'worlds')}")


def _worlds(args: list[str]) -> list[list[str]]:
  if "--" not in args:
    return [[arg] for arg in args]
  worlds = [[]]
  for arg in args:
    if arg == "--":
      worlds.append([])
    else:
      worlds[-1].append(arg)
  if not all(worlds):
    raise InputError("`--` separates worlds: each needs at least one DIR_A[,DIR_B] pair")
  return worlds


if __name__ == "__main__":
  if len(sys.argv) < 4:
    sys.exit(__doc__)
  try:
    main(sys.argv[1], sys.argv[2], _worlds(sys.argv[3:]))
  except InputError as e:
    sys.exit(f"paired_runs.py: {e}")
