"""One row per records folder, named by its last `_` suffix (a world seed or a training
seed, as the folders are named): the reference points, the systems and REALM's paired
differences (points +- SE over the same questions), in markdown.

  python results/experiments/seed_table.py results/records/quickstart/seed_0 [seed_1 ...]
"""
import sys

from realm_bench.reporting import summary


def _em(recs, experiment):
  return summary.metric_of(recs.get((experiment, "evaluate", "test")), "exact_match")


def _paired(a, b):
  found = summary.paired_difference(a, b)
  return "—" if found is None else f"{found[0]:+.1f} ± {found[1]:.1f}"


def main(folders):
  print("| seed | prior | BM25 R@5 | BM25 + reader | closed-book | ORQA | REALM | "
        "ICT R@5 | REALM R@5 | REALM − ORQA | REALM − BM25 reader | REALM − closed-book | "
        "REALM − ICT R@5 |")
  print("|" + "---|" * 1 + "---:|" * 12)
  for folder in folders:
    recs = summary.evaluation_records(folder)
    recall = lambda e: summary.metric_of(recs.get((e, "recall", "dev")), "recall@5")  # pylint: disable=cell-var-from-loop
    test = lambda e: recs.get((e, "evaluate", "test"))  # pylint: disable=cell-var-from-loop
    cells = [_em(recs, "answer_prior"), recall("bm25"), _em(recs, "bm25_reader"),
             _em(recs, "closed_book"), _em(recs, "orqa"), _em(recs, "realm"), recall("ict"),
             recall("realm")]
    diffs = [_paired(test("realm"), test(e)) for e in ("orqa", "bm25_reader", "closed_book")]
    diffs.append(_paired(recs.get(("realm", "recall", "dev")), recs.get(("ict", "recall", "dev"))))
    seed = folder.rstrip("/").rsplit("_", 1)[-1]
    print(f"| {seed} | " + " | ".join(summary.fmt(c) for c in cells) + " | "
          + " | ".join(diffs) + " |")


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  main(sys.argv[1:])
