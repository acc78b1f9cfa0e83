"""What a retriever's top 7 are made of, for masked pre-training sentences and dev questions.

  python results/experiments/candidate_kinds.py QUICKSTART_OUT RUN_DIR [RUN_DIR ...]

Per run and query set: gold@7 (the block that states the fact), how many of the 7 are blocks
of the same subject, how many state the same relation of another subject, and how many hold
the answer string without being the gold block. REALM's gradient raises candidates the reader
finds useful and lowers the rest, so these counts show which features pre-training rewards:
the subject (what questions need) or the relation (what only tells the answer's type).
"""
import collections
import json
import sys
from pathlib import Path

import numpy as np

from realm_bench import checkpoints
from realm_bench.pipelines import base, batching
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex
from realm_bench.tasks import vocab as vocab_lib
from sentence_retrieval import retriever_setup  # this folder


def _norm(text: str) -> str:
  return "".join(text.lower().split()).replace("##", "")


def main(out: str, runs: list[str]) -> None:
  model, lengths, corpus = retriever_setup(out)
  vocab = vocab_lib.get_vocabulary(f"{out}/vocab.txt")
  world = Path(out) / "world"
  facts = [json.loads(line) for line in (world / "truth/facts.jsonl").open()]
  minor = [json.loads(line) for line in (world / "truth/minor_facts.jsonl").open()]
  by_block = collections.defaultdict(list)
  for f in facts + minor:
    by_block[f["block_id"]].append(f)
  blocks = [json.loads(line) for line in (world / "corpus/blocks.jsonl").open()]
  text = {b["id"]: _norm(b["title"] + " " + b["body"]) for b in blocks}
  title = {b["id"]: b["title"] for b in blocks}
  fact_of_question = {q.lower(): f for f in facts for q in f["questions"].get("nq", [])}

  sentences = []   # (inputs, gold block, relation, answer)
  for e in base.task_examples("realm_bench.synthetic.pretrain", "train",
                              lengths.for_queries())[:3000]:
    answer = _norm(vocab.decode([int(t) for t in e["targets"] if t]))
    gold = int(e["block_id"])
    fact = next((f for f in by_block[gold] if _norm(f["object"]) == answer), None)
    sentences.append((e["inputs"], gold, fact and fact["relation"], answer))
  questions = []
  for e in base.task_examples("realm_bench.synthetic.nq_open", "validation",
                              lengths.for_queries()):
    f = fact_of_question.get(e["question"].decode().lower())
    if f is not None:
      questions.append((e["inputs"], f["block_id"], f["relation"], _norm(f["object"])))

  towers = Towers(model)
  for run in runs:
    params = {"retriever": checkpoints.load_params(f"{run}/checkpoints")["retriever"]}
    index = ExactIndex()
    index.build(towers.embed_docs(params, corpus.doc_inputs), corpus.ids)
    for name, items in (("sentences", sentences), ("questions", questions)):
      q = towers.embed_queries(params, batching.pad_rows([i[0] for i in items], lengths.query))
      _, top = index.search(q, 7)
      counts = np.zeros(4)
      for (_, gold, relation, answer), row in zip(items, top):
        row = [int(b) for b in row]
        counts += [gold in row,
                   sum(title[b] == title[gold] for b in row),
                   sum(title[b] != title[gold]
                       and any(f["relation"] == relation for f in by_block[b]) for b in row),
                   sum(b != gold and answer in text[b] for b in row)]
      c = counts / len(items)
      print(f"{Path(run).name:14s} {name:9s} n={len(items)} gold@7={100 * c[0]:.1f} "
            f"same_subject={c[1]:.2f} same_relation_other_subject={c[2]:.2f} "
            f"answer_string_not_gold={c[3]:.2f}", flush=True)


if __name__ == "__main__":
  if len(sys.argv) < 3:
    sys.exit(__doc__)
  main(sys.argv[1], sys.argv[2:])
