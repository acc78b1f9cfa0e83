"""How often a retriever finds the source block of masked pre-training sentences.

  python results/experiments/sentence_retrieval.py QUICKSTART_OUT RUN_DIR [K,K,...]

Prints, for the first 3,000 pre-training sentences and by subject kind: entity@7 (a block of
the subject's article among the top 7, REALM's candidates besides the null document), gold@7
and gold@1 (the block the sentence restates), and gold@K for each extra K given (what more
candidates would put before the reader). REALM's retriever can only be rewarded for blocks it
retrieves, so gold@7 bounds what pre-training can teach it.
"""
import collections
import json
import sys
from pathlib import Path

import gin

from realm_bench import checkpoints, gin_utils
from realm_bench.pipelines import base, batching
from realm_bench.retrieval.embed import Towers
from realm_bench.retrieval.index import ExactIndex
from realm_bench.tasks.data import SequenceLengths


def retriever_setup(out):
  """(REALM model, sequence lengths, corpus) of a quickstart's world, as its runs saw them:
  what a script needs to embed the corpus and queries with some run's retriever."""
  gin_utils.parse_gin(["runs/pretrain.gin", "sizes/tiny.gin"],
                      [f"WORLD_DIR='{out}/world'", f"VOCAB_PATH='{out}/vocab.txt'",
                       "RUN_DIR='unused'", "WARM_START=None"])
  model = gin.query_parameter("train_lib.train.model").scoped_configurable_fn()
  lengths = gin.get_configurable(SequenceLengths)()
  return model, lengths, base.load_corpus("realm_bench.synthetic.corpus", lengths)


def main(out, run_dir, extra_ks=()):
  model, lengths, corpus = retriever_setup(out)
  sentences = base.task_examples("realm_bench.synthetic.pretrain", "train",
                                 lengths.for_queries())[:3000]
  params = {"retriever": checkpoints.load_params(f"{run_dir}/checkpoints")["retriever"]}
  towers = Towers(model)
  index = ExactIndex()
  index.build(towers.embed_docs(params, corpus.doc_inputs), corpus.ids)
  queries = towers.embed_queries(params, batching.pad_rows([e["inputs"] for e in sentences],
                                                           lengths.query))
  _, top_all = index.search(queries, max((7, *extra_ks)))
  top = top_all[:, :7]
  title = dict(zip(corpus.ids.tolist(), corpus.titles))
  facts = {f["block_id"]: f for f in map(json.loads,
                                         Path(f"{out}/world/truth/facts.jsonl").open())}
  counts = collections.defaultdict(lambda: [0, 0, 0, 0, *(0 for _ in extra_ks)])
  for e, row, full in zip(sentences, top, top_all):
    gold = int(e["block_id"])
    kind = facts[gold]["subject_kind"] if gold in facts else "?"
    for key in ("all", kind):
      c = counts[key]
      c[0] += 1
      c[1] += any(title[int(b)] == title[gold] for b in row)
      c[2] += gold in row
      c[3] += gold == int(row[0])
      for i, k in enumerate(extra_ks):
        c[4 + i] += gold in full[:k]
  for key, (n, entity, gold7, gold1, *more) in sorted(counts.items()):
    print(f"{key:14s} n={n} entity@7={100 * entity / n:.1f} gold@7={100 * gold7 / n:.1f} "
          f"gold@1={100 * gold1 / n:.1f}"
          + "".join(f" gold@{k}={100 * m / n:.1f}" for k, m in zip(extra_ks, more)))


if __name__ == "__main__":
  if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
  ks = sys.argv[3].split(",") if len(sys.argv) == 4 else []
  if not all(k.isdigit() and int(k) > 0 for k in ks):
    sys.exit(f"K,K,...: expected comma-separated whole numbers above 0, got {sys.argv[3]!r}")
  main(*sys.argv[1:3], tuple(sorted({int(k) for k in ks} - {7})))
