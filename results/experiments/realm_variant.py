"""A REALM pre-training variant from a quickstart's BERT and ICT runs, and its recall.

  python results/experiments/realm_variant.py OUT NAME [--oracle | --random] [--finetune]
      [gin bindings...]

`--oracle` makes the source block candidate 1 of every sentence (the reader test of the log:
does the knowledge-augmented encoder learn to read a block that holds the answer?).
`--random` gives every sentence uniformly random blocks in place of the retrieved ones (seeded
by the step): the control for what an encoder gains from REALM's pre-training text and
masking alone, without retrieval.
`--finetune` then fine-tunes and evaluates it as the quickstart's REALM row (the bindings hold
for pre-training only): what a variant's retriever and encoder give in exact match.
Writes OUT/runs/NAME and OUT/runs/NAME_recall_dev (with `--finetune`, also NAME_finetune,
NAME_eval_test, NAME_eval_dev). A finished stage is not run again.
"""
import sys
from pathlib import Path

import numpy as np

from realm_bench import stages as stages_lib
from realm_bench.pipelines import batching, realm


def oracle_prepare(self, step, params, raw):
  del step
  query_ids = batching.pad_rows([e["inputs"] for e in raw], self.lengths.query)
  q = self.towers.embed_queries(params, query_ids, batch_size=len(raw))
  _, retrieved = self.refresher.index.search(q, self.num_candidates - 1)
  source = np.array([e["block_id"] for e in raw])
  rest = batching.select_candidates(retrieved, source, self.num_candidates - 2)
  return self._batch(raw, np.concatenate([source[:, None], rest], axis=1))


def random_prepare(self, step, params, raw):
  del params
  rng = np.random.default_rng(step)
  ids = np.asarray(self.corpus.ids)
  return self._batch(raw, ids[rng.integers(0, len(ids), (len(raw), self.num_candidates - 1))])


def run(out: Path, name: str, bindings: list[str], finetune: bool = False) -> None:
  """REALM pre-training NAME from OUT's BERT and ICT runs with the quickstart's settings plus
  `bindings`, then its zero-shot recall (OUT/runs/NAME_recall_dev) and, with `finetune`, the
  REALM row's fine-tuning and evaluations from it."""
  config = stages_lib.QuickstartConfig()
  stages = stages_lib.Stages(out, config)
  runs = out / "runs"
  run_dir = stages.train(name, ["runs/pretrain.gin"],
                         stages_lib.pretrain_bindings(config, runs / "ict", runs / "bert")
                         + bindings)
  stages.recall(name + "_recall_dev", "realm", run_dir)
  if finetune:
    tuned = stages.train(f"{name}_finetune", ["runs/finetune.gin"],
                         stages_lib.finetune_bindings(config, run_dir, runs / "bert"),
                         kind="finetune")
    for split, short in (("test", "test"), ("validation", "dev")):
      stages.evaluate(f"{name}_eval_{short}", "realm", tuned, split)


if __name__ == "__main__":
  args = sys.argv[1:]
  if "--oracle" in args:
    args.remove("--oracle")
    realm.RealmPipeline.prepare = oracle_prepare
  elif "--random" in args:
    args.remove("--random")
    realm.RealmPipeline.prepare = random_prepare
  tune = "--finetune" in args
  if tune:
    args.remove("--finetune")
  sys.argv = sys.argv[:1]
  run(Path(args[0]), args[1], args[2:], finetune=tune)
