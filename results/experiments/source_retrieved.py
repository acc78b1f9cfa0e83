"""How often REALM pre-training's candidates hold the sentence's source block, early and late.

  python results/experiments/source_retrieved.py RUN_DIR [RUN_DIR ...]

RUN_DIR holds a pre-training run's metrics.jsonl (a run folder, or a record folder's logs/NAME).
Prints the mean of the logged `source_block_retrieved` over the first and the last fifth of the
logged steps: a stale index shows as candidates that stop holding the block the sentence came
from, while a fresh one keeps finding it.
"""
import json
import sys
from pathlib import Path


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


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  for run in sys.argv[1:]:
    first, last = fifths(run)
    print(f"{run}: first fifth {first:.2f}, last fifth {last:.2f}")
