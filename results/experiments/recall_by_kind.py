"""Entity and gold-block Recall@5 of a recall run, by subject kind and question family.

  python results/experiments/recall_by_kind.py RECALL_RUN_DIR WORLD_DIR

String-match recall (what `recall` reports) counts any block holding the answer text; this
splits it into "a block about the question's subject" (entity) and "the block stating the
fact" (gold, from the world's truth/ files), which is what tells a retriever that matches
names from one that matches relations.
"""
import collections
import json
import sys
from pathlib import Path


def _jsonl(path):
  return [json.loads(line) for line in Path(path).read_text().splitlines()]


def main(run_dir, world):
  blocks = {b["id"]: b for b in _jsonl(f"{world}/corpus/blocks.jsonl")}
  owner = {}
  for fact in _jsonl(f"{world}/truth/facts.jsonl"):
    for question, family in zip(fact["questions"]["nq"], fact["question_families"]["nq"]):
      owner[question] = (fact, family)
  counts = collections.defaultdict(lambda: [0, 0, 0])
  for row in _jsonl(f"{run_dir}/retrieved_validation.jsonl"):
    fact, family = owner[row["question"]]
    top = row["retrieved"][:5]
    entity = any(blocks[b]["title"] == fact["subject"] for b in top)
    for key in ("all", fact["subject_kind"], family):
      c = counts[key]
      c[0] += 1
      c[1] += entity
      c[2] += fact["block_id"] in top
  for key, (n, entity, gold) in sorted(counts.items()):
    print(f"{key:14s} n={n:5d} entity@5={100 * entity / n:5.1f} gold@5={100 * gold / n:5.1f}")


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  main(*sys.argv[1:])
