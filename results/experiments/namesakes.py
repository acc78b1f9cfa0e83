"""How often a retriever's top 5 puts a person's namesake's block of the asked relation before
the gold block (E97).

  python results/experiments/namesakes.py WORLD_DIR RECALL_RUN_DIR|bm25 [RECALL_RUN_DIR|bm25 ...]

Most of the world's people share a name word with another person (83% of world 0's share a
surname), and a person's blocks name them by surname only, so the title's first name is all that
tells a namesake's birth-year block from the subject's. E97 found 93% of the dense REALM
system's wrong answers from another entity's block come from a namesake's. Per recall run (its
retrieved_validation.jsonl, NQ dev), over the questions about a person with a namesake (another
person sharing a name word): gold@5, a namesake's block stating the asked relation in the top 5,
and that block ranked before the gold block (or the gold block missing). With two or more runs,
each later run's rates are also given paired against the first's (± the SE of the per-question
difference), e.g. REALM's zero-shot retriever against ICT's. `bm25` in place of a run is BM25's
top 5, searched as the pipeline searches them (the reference point).
"""
import json
import sys
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError
from realm_bench.pipelines import ict
from realm_bench.reporting import summary
from realm_bench.retrieval.bm25 import Bm25Retriever


def read_jsonl(path):
  path = Path(path)
  if not path.exists():
    raise InputError("no such file", path=path)
  return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def namesakes_of(subjects) -> dict[str, set[str]]:
  """Each subject -> the other subjects sharing a name word with it (the ICT pipeline's
  definition, over names instead of corpus rows)."""
  names = sorted(subjects)
  found = ict.namesakes(range(len(names)), names)
  return {names[r]: {names[x] for x in near} for r, near in found.items()}


def people_namesakes(facts) -> dict[str, set[str]]:
  """Each person of the world -> their namesakes."""
  return namesakes_of({f["subject"] for f in facts if f["subject_kind"] == "person"})


def namesake_relation_blocks(facts, others=None) -> dict[tuple[str, str], set[int]]:
  """(person, relation) -> the blocks of the person's namesakes stating that relation.
  `others`: `people_namesakes(facts)`, where the caller has it already."""
  relation_blocks = {}
  for f in facts:
    relation_blocks.setdefault((f["subject"], f["relation"]), set()).add(f["block_id"])
  others = people_namesakes(facts) if others is None else others
  return {(f["subject"], f["relation"]): set().union(
      *(relation_blocks.get((s, f["relation"]), set()) for s in others[f["subject"]]))
          for f in facts if f["subject"] in others}


def outcomes(world: Path, run_dir: Path) -> list[tuple[bool, bool, bool]]:
  """(gold in top 5, a namesake's same-relation block in top 5, it ranks before gold), per
  dev question about a person with a namesake, in the dev split's order."""
  return [found[1:4] for found in positions(world, run_dir)]


# A split's questions file and the suffix of a recall run's retrieved file for it.
SPLITS = {"dev": ("dev.jsonl", "validation"), "train": ("train.jsonl", "train")}


def positions(world: Path, run_dir: Path,
              split: str = "dev") -> list[tuple[int, bool, bool, bool, int]]:
  """`outcomes` with each question's index in the split first and the number of namesake's
  blocks in the top 5 last."""
  facts = read_jsonl(world / "truth" / "facts.jsonl")
  others = people_namesakes(facts)
  decoys_of = namesake_relation_blocks(facts, others)
  owner = {q: f for f in facts for q in f["questions"]["nq"]}
  questions_file, suffix = SPLITS[split]
  asked = [r["question"] for r in read_jsonl(world / "open_qa" / "nq" / questions_file)]
  retrieved = run_dir / f"retrieved_{suffix}.jsonl"
  if str(run_dir) == "bm25":
    top5 = Bm25Retriever.from_world(world).search(asked, 5)[1].tolist()
    rows = [{"question": q, "retrieved": top} for q, top in zip(asked, top5)]
  else:
    rows = read_jsonl(retrieved)
  if [r["question"] for r in rows] != asked:
    raise InputError(f"its questions are not the NQ twin's {split} split, in order",
                     path=retrieved)
  found = []
  for index, row in enumerate(rows):
    fact = owner[row["question"]]
    if fact["subject_kind"] != "person" or not others[fact["subject"]]:
      continue
    decoys = decoys_of[(fact["subject"], fact["relation"])]
    top = row["retrieved"][:5]
    gold = top.index(fact["block_id"]) if fact["block_id"] in top else len(top)
    first_decoy = min((i for i, b in enumerate(top) if b in decoys), default=None)
    found.append((index, gold < len(top), first_decoy is not None,
                  first_decoy is not None and first_decoy < gold,
                  sum(b in decoys for b in top)))
  return found


def main(world: str, runs: list[str]) -> None:
  world = Path(world)
  results = [(run, outcomes(world, Path(run))) for run in runs]
  names = ("gold@5", "namesake's block in top 5", "namesake's block before gold")
  print("| recall run | questions | " + " | ".join(names) + " |")
  print("|---|---:|" + "---:|" * len(names))
  for run, found in results:
    n = len(found)
    print(f"| {run} | {n} | " + " | ".join(
        f"{100 * sum(f[i] for f in found) / n:.1f}" for i in range(len(names))) + " |")
  first_run, first = results[0]
  for run, found in results[1:]:
    cells = []
    for i in range(len(names)):
      diff, se = summary.paired(np.array([b[i] for b in found]),
                                np.array([a[i] for a in first]))
      cells.append(f"{diff:+.1f} ± {se:.1f}")
    print(f"| {run} − {first_run} | | " + " | ".join(cells) + " |")


if __name__ == "__main__":
  if len(sys.argv) < 3:
    sys.exit(__doc__)
  try:
    main(sys.argv[1], sys.argv[2:])
  except InputError as e:
    sys.exit(f"namesakes.py: {e}")
