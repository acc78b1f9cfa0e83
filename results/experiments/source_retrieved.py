"""How often REALM pre-training's candidates hold the sentence's source block, early and late.

  python results/experiments/source_retrieved.py [--recall] RUN_DIR [RUN_DIR ...]

RUN_DIR holds a pre-training run's metrics.jsonl (a run folder, or a record folder's logs/NAME).
Prints the mean of the logged `source_block_retrieved` over the first and the last fifth of the
logged steps: a stale index shows as candidates that stop holding the block the sentence came
from, while a fresh one keeps finding it. `--recall` reads each run's zero-shot Recall@5 beside
it, from the records' layout (`logs/X_pretrain` -> `runs/X_recall_dev/record.json`), and prints
the Spearman correlation of the last fifth with Recall@5 over the runs given: whether losing the
source block in pre-training is what costs recall on questions.
"""
import json
import sys
from pathlib import Path

from scipy import stats


def fifths(run_dir: str) -> tuple[float, float]:
  path = Path(run_dir) / "metrics.jsonl"
  if not path.exists():
    sys.exit(f"source_retrieved.py: {path}: no such file")
  rows = [json.loads(line) for line in path.read_text().splitlines()]
  values = [r["source_block_retrieved"] for r in rows if "source_block_retrieved" in r]
  if len(values) < 5:
    sys.exit(f"source_retrieved.py: {path}: fewer than 5 steps log source_block_retrieved")
  fifth = len(values) // 5
  return sum(values[:fifth]) / fifth, sum(values[-fifth:]) / fifth


def recall(run_dir: str) -> float:
  """The Recall@5 of the recall run that belongs to a records folder's logs/X_pretrain."""
  log = Path(run_dir)
  if log.parent.name != "logs" or not log.name.endswith("_pretrain"):
    sys.exit(f"source_retrieved.py: {log}: --recall reads logs/X_pretrain folders only")
  path = log.parents[1] / "runs" / f"{log.name[:-len('_pretrain')]}_recall_dev" / "record.json"
  if not path.exists():
    sys.exit(f"source_retrieved.py: {path}: no such file")
  return json.loads(path.read_text())["metrics"]["recall@5"]


if __name__ == "__main__":
  args = sys.argv[1:]
  with_recall = "--recall" in args
  runs = [a for a in args if a != "--recall"]
  if not runs:
    sys.exit(__doc__)
  lasts, recalls = [], []
  for run in runs:
    r5 = recall(run) if with_recall else None   # the layout first: its error says more
    first, last = fifths(run)
    line = f"{run}: first fifth {first:.2f}, last fifth {last:.2f}"
    if with_recall:
      recalls.append(r5)
      lasts.append(last)
      line += f", R@5 {r5:.1f}"
    print(line)
  if with_recall and len(runs) >= 3:
    print(f"Spearman (last fifth, R@5) over {len(runs)} runs: "
          f"{stats.spearmanr(lasts, recalls).statistic:.2f}")
