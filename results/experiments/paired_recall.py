"""The paired difference of two evaluation records over the same questions.

  python results/experiments/paired_recall.py RECORD_DIR_A RECORD_DIR_B

Prints A's and B's metric, A - B in points and its standard error (the records' per-question
outcomes; the quickstart's summary uses the same statistic).
"""
import sys
from pathlib import Path

from realm_bench.reporting import summary
from realm_bench.reporting.records import RECORD_NAME, read_record


def main(a_dir, b_dir):
  a, b = (read_record(Path(d) / RECORD_NAME) for d in (a_dir, b_dir))
  found = summary.paired_difference(a, b)
  if found is None:
    sys.exit("both records need per-question outcomes over the same questions")
  name = next(iter(a.metrics))
  print(f"{name}: A {a.metrics[name]:.1f}  B {b.metrics[name]:.1f}  A-B {found[0]:+.1f} "
        f"+- {found[1]:.1f} (n={a.num_examples})")


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  main(*sys.argv[1:])
