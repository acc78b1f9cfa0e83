"""Does a pre-trained retriever's zero-shot recall tell its fine-tuned EM? One row per run.

  python results/experiments/recall_and_em.py RECALL_RECORD,EVAL_RECORD [...]

Each argument names one run's two record folders: its zero-shot recall (`X_recall_dev`) and
the evaluation of its fine-tuned system (`X_eval_dev`). Prints each run's Recall@5 and exact
match, then their Spearman correlation over the runs: whether what REALM pre-training leaves
in the retriever (a stale index's loss, say) is still there after ORQA's fine-tuning.
"""
import sys
from pathlib import Path

from scipy import stats

from realm_bench.errors import InputError
from realm_bench.reporting.records import RECORD_NAME, read_record


def _metric(folder: str, name: str) -> float:
  path = Path(folder) / RECORD_NAME
  if not path.exists():
    raise InputError("no such record", path=path)
  metrics = read_record(path).metrics
  if name not in metrics:
    raise InputError(f"the record has no {name} (a {', '.join(metrics)} record)", path=path)
  return float(metrics[name])


def main(pairs: list[str]) -> None:
  recalls, ems = [], []
  print("| recall record | R@5 | EM |\n|---|---:|---:|")
  for pair in pairs:
    recall_dir, sep, eval_dir = pair.partition(",")
    if not sep:
      raise InputError(f"expected RECALL_RECORD,EVAL_RECORD, got {pair!r}")
    recalls.append(_metric(recall_dir, "recall@5"))
    ems.append(_metric(eval_dir, "exact_match"))
    print(f"| {recall_dir} | {recalls[-1]:.1f} | {ems[-1]:.1f} |")
  rho = stats.spearmanr(recalls, ems).statistic if len(pairs) > 2 else float("nan")
  print(f"\nSpearman (R@5, EM) over {len(pairs)} runs: {rho:.2f}")


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  try:
    main(sys.argv[1:])
  except InputError as e:
    sys.exit(f"recall_and_em.py: {e}")
