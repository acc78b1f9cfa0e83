"""The retrievers before and after fine-tuning, one row per world, from quickstart records.

  python results/experiments/finetuned_recall.py DIR/seed_0 [DIR/seed_1 ...]

(DIR: e.g. results/records/quickstart_finetune900/topical.)

Zero-shot R@5 is the recall stage's (ICT's and REALM's pre-trained retrievers); fine-tuned R@5
is the evaluation's `finetuned_recall@5`: the blocks the reader reads, found by the fine-tuned
query tower over the frozen index. NQ twin dev split. The evaluation keeps no per-question
retrieval outcomes, so a difference's SE here is the unpaired binomial one (an upper bound on
the paired SE); the last rows give each column's mean and 95% t-interval over the worlds.
"""
import sys

from realm_bench.errors import InputError
from realm_bench.reporting import stats, summary

COLUMNS = ("ICT R@5", "REALM R@5", "ORQA fine-tuned R@5", "REALM fine-tuned R@5", "BM25 R@5",
           "ORQA EM", "REALM EM", "ORQA fine-tuned − ICT", "REALM fine-tuned − ORQA fine-tuned")


def row(folder: str) -> tuple[list[float], int]:
  """The columns' values, and the dev split's size."""
  recs = summary.evaluation_records(folder)

  def get(experiment, kind):
    record = recs.get((experiment, kind, "dev"))
    if record is None:
      raise InputError(f"no {kind} record of {experiment!r} on the dev split", path=folder)
    return record

  orqa, realm = get("orqa", "evaluate"), get("realm", "evaluate")
  cells = [get("ict", "recall").metrics["recall@5"], get("realm", "recall").metrics["recall@5"],
           orqa.stats["finetuned_recall@5"], realm.stats["finetuned_recall@5"],
           get("bm25", "recall").metrics["recall@5"], orqa.metrics["exact_match"],
           realm.metrics["exact_match"]]
  return cells + [cells[2] - cells[0], cells[3] - cells[2]], orqa.num_examples


def _se(a: float, b: float, n: int) -> float:
  return (summary.binomial_se(a, n) ** 2 + summary.binomial_se(b, n) ** 2) ** 0.5


def main(folders: list[str]) -> None:
  print("| world | " + " | ".join(COLUMNS) + " |")
  print("|---|" + "---:|" * len(COLUMNS))
  rows = []
  for folder in folders:
    cells, n = row(folder)
    rows.append(cells)
    diffs = [f"{cells[7]:+.1f} ± {_se(cells[2], cells[0], n):.1f}",
             f"{cells[8]:+.1f} ± {_se(cells[3], cells[2], n):.1f}"]
    world = folder.rstrip("/").rsplit("_", 1)[-1]
    print(f"| {world} | " + " | ".join(f"{c:.1f}" for c in cells[:7]) + " | "
          + " | ".join(diffs) + " |")
  means = []
  for i in range(len(COLUMNS)):
    values = [r[i] for r in rows]
    iv = stats.t_interval(values, confidence=0.95, what="worlds")
    means.append(f"{sum(values) / len(values):+.1f}" if i >= 7 else
                 f"{sum(values) / len(values):.1f}")
    if iv is not None:
      means[-1] += f" [{iv.low:+.1f}, {iv.high:+.1f}]" if i >= 7 else \
                   f" [{iv.low:.1f}, {iv.high:.1f}]"
  print("| mean | " + " | ".join(means) + " |")


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  try:
    main(sys.argv[1:])
  except InputError as e:
    sys.exit(f"finetuned_recall.py: {e}")
