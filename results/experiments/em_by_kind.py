"""Two evaluations' exact match by the question subject's kind, paired over the same questions
(E97).

  python results/experiments/em_by_kind.py WORLD_DIR A_EVAL_RUN B_EVAL_RUN

A_EVAL_RUN and B_EVAL_RUN are evaluation record folders on the same NQ-twin split (e.g.
.../seed_0/realm_eval_test and .../seed_0/bm25_reader_eval_test); WORLD_DIR is the world they
ran on (its truth/ files give each question's subject kind). Prints per kind (people, places,
organisations) the question count, A's and B's EM and A − B ± the SE of the per-question
difference: whether a system's lead or deficit is one kind's (people, whose blocks name them
by surname and most of whom share a name word with another person, against places and
organisations, found by a unique name).
"""
import json
import sys
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError
from realm_bench.reporting import summary
from realm_bench.reporting.records import RECORD_NAME, read_record

SPLIT_FILES = {"test": "test.jsonl", "dev": "dev.jsonl"}


def _questions(world: Path, split: str) -> list[str]:
  path = world / "open_qa" / "nq" / SPLIT_FILES[split]
  if not path.exists():
    raise InputError("no such file", path=path)
  return [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]


def main(world: str, a: str, b: str) -> None:
  world = Path(world)
  records = [read_record(Path(run) / RECORD_NAME) for run in (a, b)]
  split = records[0].split
  if records[1].split != split or split not in SPLIT_FILES:
    raise InputError(f"the two records are not on one NQ-twin split ({records[0].split}, "
                     f"{records[1].split})", path=Path(b) / RECORD_NAME)
  questions = _questions(world, split)
  outcomes = []
  for run, record in zip((a, b), records):
    found = summary.outcomes(record)
    count = 0 if found is None else len(found)
    if count != len(questions):
      raise InputError(f"{count} per-question outcomes for the {len(questions)} questions "
                       f"of {split}", path=Path(run) / RECORD_NAME)
    outcomes.append(found)
  facts = [json.loads(line) for line in
           (world / "truth" / "facts.jsonl").read_text().splitlines() if line.strip()]
  kind_of = {q: f["subject_kind"] for f in facts for q in f["questions"]["nq"]}
  kinds = np.array([kind_of[q] for q in questions])
  print(f"{split}, {len(questions)} questions")
  print("| subject kind | questions | A | B | A − B |")
  print("|---|---:|---:|---:|---:|")
  for kind in ("person", "place", "organisation", None):
    mask = np.ones(len(kinds), bool) if kind is None else kinds == kind
    if not mask.any():
      continue
    diff, se = summary.paired(outcomes[0][mask], outcomes[1][mask])
    print(f"| {kind or 'all'} | {mask.sum()} | {100 * outcomes[0][mask].mean():.1f} | "
          f"{100 * outcomes[1][mask].mean():.1f} | {diff:+.1f} ± {se:.1f} |")


if __name__ == "__main__":
  if len(sys.argv) != 4:
    sys.exit(__doc__)
  try:
    main(*sys.argv[1:])
  except InputError as e:
    sys.exit(f"em_by_kind.py: {e}")
