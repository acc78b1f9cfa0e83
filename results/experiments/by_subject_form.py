"""Each system's NQ-twin scores split by how the question names its subject (by name, by
alias), from a quickstart's records on a world with aliases (`WorldConfig.alias_fraction`):
test EM for the readers, dev zero-shot Recall@5 for the retrievers, each +- one binomial SE.

  python results/experiments/by_subject_form.py OUT/runs OUT/world
"""
import sys
from pathlib import Path

from realm_bench.io_utils import read_jsonl
from realm_bench.reporting import summary

READERS = ("bm25_reader", "closed_book", "orqa", "realm")
RETRIEVERS = ("bm25", "ict", "realm")


def _forms(world: Path, split: str) -> list[str]:
  """The subject form of each question of the split, in the file's (and the records') order."""
  form_of = {q: form for _, fact in read_jsonl(world / "truth/facts.jsonl")
             for q, form in zip(fact["questions"]["nq"], fact["question_subject_forms"]["nq"])}
  return [form_of[q["question"]] for _, q in read_jsonl(world / f"open_qa/nq/{split}.jsonl")]


def _cell(outcomes, forms, form) -> str:
  chosen = [int(o) for o, f in zip(outcomes, forms) if f == form]
  percent = 100.0 * sum(chosen) / len(chosen)
  return f"{percent:.1f} ± {summary.binomial_se(percent, len(chosen)):.1f}"


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
      if len(outcomes) != len(forms):
        sys.exit(f"{name} {kind} {split}: {len(outcomes)} outcomes for {len(forms)} questions "
                 f"in {world}; is this the quickstart's own world?")
      print(f"| {name} | {metric} | {_cell(outcomes, forms, 'name')} | "
            f"{_cell(outcomes, forms, 'alias')} |")


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  main(*sys.argv[1:])
