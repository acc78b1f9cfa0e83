"""One row per world seed from quickstart records: the reference points, the systems and
REALM's paired differences (points +- SE over the same questions), in markdown.

  python results/experiments/seed_table.py results/records/quickstart/seed_0 [seed_1 ...]
"""
import sys

from realm_bench.reporting import summary


def _em(recs, experiment):
  return summary._metric(recs.get((experiment, "evaluate", "test")), "exact_match")  # pylint: disable=protected-access


def _paired(a, b):
  oa, ob = summary._outcomes(a), summary._outcomes(b)  # pylint: disable=protected-access
  if oa is None or ob is None:
    return "—"
  diff, se = summary.paired(oa, ob)
  return f"{diff:+.1f} ± {se:.1f}"


def main(folders):
  print("| world seed | prior | BM25 R@5 | BM25 + reader | closed-book | ORQA | REALM | "
        "ICT R@5 | REALM R@5 | REALM − ORQA | REALM − BM25 reader | REALM − closed-book | "
        "REALM − ICT R@5 |")
  print("|" + "---|" * 1 + "---:|" * 12)
  for folder in folders:
    recs = summary._records(folder)  # pylint: disable=protected-access
    recall = lambda e: summary._metric(recs.get((e, "recall", "dev")), "recall@5")  # pylint: disable=protected-access,cell-var-from-loop
    test = lambda e: recs.get((e, "evaluate", "test"))  # pylint: disable=cell-var-from-loop
    cells = [_em(recs, "answer_prior"), recall("bm25"), _em(recs, "bm25_reader"),
             _em(recs, "closed_book"), _em(recs, "orqa"), _em(recs, "realm"), recall("ict"),
             recall("realm")]
    diffs = [_paired(test("realm"), test(e)) for e in ("orqa", "bm25_reader", "closed_book")]
    diffs.append(_paired(recs.get(("realm", "recall", "dev")), recs.get(("ict", "recall", "dev"))))
    seed = folder.rstrip("/").rsplit("_", 1)[-1]
    print(f"| {seed} | " + " | ".join(summary._fmt(c) for c in cells) + " | "  # pylint: disable=protected-access
          + " | ".join(diffs) + " |")


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  main(sys.argv[1:])
