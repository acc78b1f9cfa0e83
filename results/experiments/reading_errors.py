"""Where a reader's answers come from, over its own top 5 blocks: the dense system's against the
BM25 reader's (E93).

  python results/experiments/reading_errors.py WORLD_DIR DENSE_RETRIEVED DENSE_PREDICTIONS \
      BM25_PREDICTIONS

DENSE_RETRIEVED is a `recall` run's retrieved_validation.jsonl on the fine-tuning run (its
query tower over its frozen index), DENSE_PREDICTIONS and BM25_PREDICTIONS the evaluations'
predictions_validation.jsonl; BM25's top 5 are searched here as the pipeline searches them.
Per system, over the NQ twin's dev questions: exact match, how many of the top 5 blocks are
about the question's subject, gold@5 (the block stating the fact, from truth/), exact match
with and without the gold block in the top 5, and for each prediction the first top-5 block
that holds it: the gold block, another block of the subject, or a block of another entity.
E92 found equal top-5 answer recall and 22-24 EM between the two readings; this says whether
the dense system's blocks mislead its reader (other entities' blocks that hold an answer of
the right type) or its reader misreads the right block, and (E97) how many of those other
entities are namesakes of the subject (a title sharing a word with its name).
"""
import collections
import json
import sys
from pathlib import Path

from realm_bench.retrieval.bm25 import Bm25Retriever
from realm_bench.tasks.metrics import exact_match, normalize_answer


def _jsonl(path):
  return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _predictions(path, questions):
  rows = _jsonl(path)
  if [r["question"] for r in rows] != questions:
    sys.exit(f"{path}: its questions are not the dev split's, in order")
  return [r["prediction"] for r in rows]


def tally(questions, answers, facts, blocks, top5, predictions) -> dict:
  c = collections.Counter()
  for q, answer, top, pred in zip(questions, answers, top5, predictions):
    fact = facts[q]
    gold = fact["block_id"] in top
    right = exact_match(pred, answer)
    c["n"] += 1
    c["em"] += right
    c["subject_blocks"] += sum(blocks[b]["title"] == fact["subject"] for b in top if b >= 0)
    c["gold"] += gold
    c["em_gold"] += right and gold
    c["em_no_gold"] += right and not gold
    holder = next((b for b in top if b >= 0 and normalize_answer(pred) and normalize_answer(pred)
                   in normalize_answer(blocks[b]["title"] + " " + blocks[b]["body"])), None)
    source = ("none" if holder is None else "gold" if holder == fact["block_id"]
              else "subject" if blocks[holder]["title"] == fact["subject"] else "other")
    c[f"{'right' if right else 'wrong'}_{source}"] += 1
    if source == "other" and not right:
      # Most of the world's people share a name word with another person (E97).
      c["wrong_other_namesake"] += bool(set(fact["subject"].lower().split())
                                        & set(blocks[holder]["title"].lower().split()))
  return c


def main(world, dense_retrieved, dense_predictions, bm25_predictions) -> None:
  world = Path(world)
  dev = _jsonl(world / "open_qa" / "nq" / "dev.jsonl")
  questions = [r["question"] for r in dev]
  answers = [r["answer"] for r in dev]
  blocks = {b["id"]: b for b in _jsonl(world / "corpus" / "blocks.jsonl")}
  facts = {q: f for f in _jsonl(world / "truth" / "facts.jsonl") for q in f["questions"]["nq"]}
  retrieved = _jsonl(dense_retrieved)
  if [r["question"] for r in retrieved] != questions:
    sys.exit(f"{dense_retrieved}: its questions are not the dev split's, in order")
  bm25 = Bm25Retriever.from_world(world).search(questions, 5)[1].tolist()
  rows = {"dense": tally(questions, answers, facts, blocks, [r["retrieved"][:5] for r in retrieved],
                         _predictions(dense_predictions, questions)),
          "bm25": tally(questions, answers, facts, blocks, bm25,
                        _predictions(bm25_predictions, questions))}
  print("| top 5 | EM | subject's blocks in top 5 | gold@5 | EM, gold in top 5 | EM, gold not "
        "in top 5 | wrong: from the gold block | from another block of the subject | from "
        "another entity's block | of those, a namesake's | from no block |")
  print("|---|" + "---:|" * 10)
  for name, c in rows.items():
    n, g = c["n"], c["gold"]
    pct = lambda x, d: f"{100 * x / d:.1f}" if d else "-"
    wrong = n - c["em"]
    print(f"| {name} | {pct(c['em'], n)} | {c['subject_blocks'] / n:.2f} | {pct(g, n)} | "
          f"{pct(c['em_gold'], g)} | {pct(c['em_no_gold'], n - g)} | "
          + " | ".join(pct(c[f"wrong_{s}"], wrong) for s in ("gold", "subject", "other"))
          + f" | {pct(c['wrong_other_namesake'], c['wrong_other'])}"
          + f" | {pct(c['wrong_none'], wrong)} |")
  print(f"dev questions: {len(questions)}")


if __name__ == "__main__":
  if len(sys.argv) != 5:
    sys.exit(__doc__)
  main(*sys.argv[1:])
