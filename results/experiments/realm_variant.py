"""A REALM pre-training variant from a quickstart's BERT and ICT runs, and its recall.

  python results/experiments/realm_variant.py OUT NAME [--oracle] [--namesakes] [--random]
      [--finetune] [gin bindings...]

`--oracle` makes the source block candidate 1 of every sentence (the reader test of the log:
does the knowledge-augmented encoder learn to read a block that holds the answer?).
`--namesakes` makes a namesake's block candidate 1 (after the source block with `--oracle`):
a block of another person sharing a word of the sentence's subject's name that states the same
relation, so that only the title's first name says it does not hold the answer (E98: does the
encoder learn to check the title against the sentence when REALM pre-training shows it
namesakes?). Sentences without such a block keep their retrieved candidates.
`--random` gives every sentence uniformly random blocks in place of the retrieved ones (seeded
by the step): the control for what an encoder gains from REALM's pre-training text and
masking alone, without retrieval.
`--finetune` then fine-tunes and evaluates it as the quickstart's REALM row (the bindings hold
for pre-training only): what a variant's retriever and encoder give in exact match.
Writes OUT/runs/NAME and OUT/runs/NAME_recall_dev (with `--finetune`, also NAME_finetune,
NAME_eval_test, NAME_eval_dev). A finished stage is not run again.
"""
import collections
import sys
from pathlib import Path

import numpy as np

import namesakes
from realm_bench import stages as stages_lib
from realm_bench.errors import InputError
from realm_bench.pipelines import batching, realm


def namesake_blocks(world: Path) -> dict[int, list[int]]:
  """Each block stating a person's fact -> the blocks of that person's namesakes (other people
  sharing a name word) stating a fact of the same relation."""
  facts = namesakes.read_jsonl(world / "truth" / "facts.jsonl")
  decoys_of = namesakes.namesake_relation_blocks(facts)
  out = collections.defaultdict(set)
  for f in facts:
    out[f["block_id"]] |= decoys_of.get((f["subject"], f["relation"]), set())
  return {block: sorted(decoys) for block, decoys in out.items() if decoys}


def forced_prepare(*, oracle: bool, decoys: dict[int, list[int]] | None):
  """A `RealmPipeline.prepare` whose first candidates are forced: the source block (`oracle`),
  then a namesake's block (`decoys`, one drawn per sentence, seeded by the step)."""
  def prepare(self, step, params, raw):
    query_ids = batching.pad_rows([e["inputs"] for e in raw], self.lengths.query)
    q = self.towers.embed_queries(params, query_ids, batch_size=len(raw))
    _, retrieved = self.refresher.index.search(q, self.num_candidates + 1)
    rng = np.random.default_rng(step)
    rows = []
    for e, found in zip(raw, retrieved):
      source = int(e["block_id"])
      forced = [source] if oracle else []
      if decoys and decoys.get(source):
        forced.append(int(rng.choice(decoys[source])))
      rest = [int(b) for b in found if b not in forced]
      rows.append((forced + rest)[:self.num_candidates - 1])
    return self._batch(raw, np.array(rows, np.int64))
  return prepare


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
  flags = {flag: flag in args for flag in ("--oracle", "--namesakes", "--random", "--finetune")}
  args = [a for a in args if a not in flags]
  if (len(args) < 2 or any(a.startswith("--") for a in args)
      or (flags["--random"] and (flags["--oracle"] or flags["--namesakes"]))):
    sys.exit(__doc__)
  try:
    if flags["--oracle"] or flags["--namesakes"]:
      realm.RealmPipeline.prepare = forced_prepare(
          oracle=flags["--oracle"],
          decoys=namesake_blocks(Path(args[0]) / "world") if flags["--namesakes"] else None)
    elif flags["--random"]:
      realm.RealmPipeline.prepare = random_prepare
    sys.argv = sys.argv[:1]
    run(Path(args[0]), args[1], args[2:], finetune=flags["--finetune"])
  except InputError as e:
    sys.exit(f"realm_variant.py: {e}")
