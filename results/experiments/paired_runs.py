"""Two runs of each world, paired over the same questions, and the mean over the worlds.

  python results/experiments/paired_runs.py A B DIR_A[,DIR_B] [DIR_A[,DIR_B] ...]

A and B are record folder names (e.g. realm_recall_dev realm_stale30x_recall_dev); each
argument is one world: A is read from DIR_A, B from DIR_B (DIR_A when not given). Prints A − B
± the SE of the per-question difference per world, then the mean and its 95% t-interval over
the worlds.
"""
import sys
from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.reporting import stats, summary
from realm_bench.reporting.records import RECORD_NAME, read_record


def main(a: str, b: str, worlds: list[str]) -> None:
  values = []
  for world in worlds:
    dir_a, _, dir_b = world.partition(",")
    paths = (Path(dir_a) / a / RECORD_NAME, Path(dir_b or dir_a) / b / RECORD_NAME)
    for path in paths:
      if not path.exists():
        raise InputError("no such record", path=path)
    found = summary.paired_difference(*(read_record(p) for p in paths))
    if found is None:
      raise InputError("the two records do not have outcomes over the same questions",
                       path=paths[0])
    values.append(found[0])
    print(f"{world}: {a} − {b} {found[0]:+.1f} ± {found[1]:.1f}")
  iv = stats.t_interval(values, confidence=0.95, what="worlds")
  over = "" if iv is None else f" [{iv.low:+.1f}, {iv.high:+.1f}] ({iv.method})"
  print(f"mean {sum(values) / len(values):+.1f}{over}")


if __name__ == "__main__":
  if len(sys.argv) < 4:
    sys.exit(__doc__)
  try:
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
  except InputError as e:
    sys.exit(f"paired_runs.py: {e}")
