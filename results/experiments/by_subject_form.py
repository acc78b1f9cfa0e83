"""Each system's NQ-twin scores split by how the question names its subject (by name, by
alias), from a quickstart's records on a world with aliases (`WorldConfig.alias_fraction`):
test EM for the readers, dev zero-shot Recall@5 for the retrievers, each +- one binomial SE.

  python results/experiments/by_subject_form.py OUT/runs OUT/world
"""
import json
import math
import sys
from pathlib import Path

from realm_bench.reporting import summary

READERS = ("bm25_reader", "closed_book", "orqa", "realm")
RETRIEVERS = ("bm25", "ict", "realm")


def _forms(world: Path, split: str) -> list[str]:
  form_of = {}
  with open(world / "truth/facts.jsonl", encoding="utf-8") as f:
    for line in f:
      fact = json.loads(line)
      for q, form in zip(fact["questions"]["nq"], fact["question_subject_forms"]["nq"]):
        form_of[q] = form
  with open(world / f"open_qa/nq/{split}.jsonl", encoding="utf-8") as f:
    return [form_of[json.loads(line)["question"]] for line in f]


def _cell(outcomes, forms, form) -> str:
  chosen = [int(o) for o, f in zip(outcomes, forms) if f == form]
  p = sum(chosen) / len(chosen)
  return f"{100 * p:.1f} ± {100 * math.sqrt(p * (1 - p) / len(chosen)):.1f}"


def main(runs: str, world: str) -> None:
  recs = summary.evaluation_records(runs)
  print("| system | metric | by name | by alias |")
  print("|---|---|---:|---:|")
  for kind, split, names, metric in (("evaluate", "test", READERS, "test EM"),
                                     ("recall", "dev", RETRIEVERS, "dev Recall@5")):
    forms = _forms(Path(world), split)
    for name in names:
      outcomes = summary.outcomes(recs.get((name, kind, split)))
      if outcomes is None:
        continue
      assert len(outcomes) == len(forms), name
      print(f"| {name} | {metric} | {_cell(outcomes, forms, 'name')} | "
            f"{_cell(outcomes, forms, 'alias')} |")


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  main(*sys.argv[1:])
