"""Whether a reader tells a person from their namesakes (E98): exact match by what its top 5
holds.

  python results/experiments/namesake_reading.py [--split train] WORLD_DIR RECALL_RUN_DIR \
      PREDICTIONS [RECALL_RUN_DIR PREDICTIONS ...]

RECALL_RUN_DIR is a `recall` run's folder on the fine-tuning run (its query tower over its
frozen index: the blocks the evaluation read), PREDICTIONS that evaluation's
predictions_validation.jsonl (NQ dev). Over the dev questions about a person with a namesake
(`namesakes.py`), exact match when the top 5 holds the gold block and no namesake's block of the
asked relation, when it holds both (the namesake's after or before the gold block), and when it
misses the gold block. A reader that checks the title's first name against the question answers
as well with a namesake's block beside the gold block as without one; one that does not picks
between the two surnames' answers by other cues: "name-blind" is the exact match of a reader that
picks uniformly among the gold block and the namesakes' blocks in the top 5 (the mean of 1 / (1
+ their number) over the questions with both). The last column is the difference, both and
none, ± its SE (binomial, two independent groups of questions). `--split train` reads the
training questions instead (the recall run's retrieved_train.jsonl and an evaluation's
predictions_train.jsonl, both run with `--gin.SPLIT="'train'"`): a reader that compares names
does as well on new people as on the ones it trained on; one that learnt its training questions
does not (E99).
"""
import json
import sys
from pathlib import Path

import numpy as np

import namesakes
from realm_bench.errors import InputError
from realm_bench.reporting import summary
from realm_bench.tasks.metrics import exact_match

CASES = ("gold, no namesake's block", "gold, namesake's block after",
         "gold, namesake's block before", "no gold")


def cases(world: Path, run_dir: Path, predictions: Path,
          split: str = "dev") -> tuple[dict[str, list[bool]], float | None]:
  """Each case -> the exact matches of its questions; the name-blind reader's exact match."""
  if split not in namesakes.SPLITS:
    raise InputError(f"--split {split}: known splits are {', '.join(namesakes.SPLITS)}")
  asked = namesakes.read_jsonl(world / "open_qa" / "nq" / namesakes.SPLITS[split][0])
  preds = namesakes.read_jsonl(predictions)
  if [p["question"] for p in preds] != [d["question"] for d in asked]:
    raise InputError(f"its questions are not the NQ twin's {split} split, in order",
                     path=predictions)
  out, blind = {case: [] for case in CASES}, []
  for i, gold, named, first, decoys in namesakes.positions(world, run_dir, split):
    case = CASES[3] if not gold else CASES[0] if not named else CASES[2] if first else CASES[1]
    out[case].append(bool(exact_match(preds[i]["prediction"], asked[i]["answer"])))
    if gold and named:
      blind.append(100 / (1 + decoys))
  return out, float(np.mean(blind)) if blind else None


def _em(hits: list[bool]) -> tuple[float, float] | None:
  """Exact match and its binomial SE, in points."""
  if not hits:
    return None
  em = 100.0 * sum(hits) / len(hits)
  return em, summary.binomial_se(em, len(hits))


def main(world: str, pairs: list[str], split: str = "dev") -> None:
  world = Path(world)
  print("| recall run | " + " | ".join(f"{c}: n, EM" for c in CASES)
        + " | name-blind, EM | both − none, EM |")
  print("|---|" + "---:|" * (len(CASES) + 2))
  for run, predictions in zip(pairs[::2], pairs[1::2]):
    found, blind = cases(world, Path(run), Path(predictions), split)
    cells = [f"{len(found[c])}, " + (f"{_em(found[c])[0]:.1f}" if found[c] else "-")
             for c in CASES]
    cells.append("-" if blind is None else f"{blind:.1f}")
    none, both = _em(found[CASES[0]]), _em(found[CASES[1]] + found[CASES[2]])
    cells.append(f"{both[0] - none[0]:+.1f} ± {np.hypot(none[1], both[1]):.1f}"
                 if none and both else "-")
    print(f"| {run} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  args = sys.argv[1:]
  split = "dev"
  if args[:1] == ["--split"] and len(args) > 1:
    split, args = args[1], args[2:]
  if len(args) < 3 or len(args) % 2 == 0 or args[0].startswith("--"):
    sys.exit(__doc__)
  try:
    main(args[0], args[1:], split)
  except InputError as e:
    sys.exit(f"namesake_reading.py: {e}")
