"""A BERT-stage variant, the ICT stages started from it, and their zero-shot recall.

  python results/experiments/bert_variant.py OUT NAME [--ict-seeds 0,1,2] [gin bindings...]

The quickstart's BERT stage (`stages.bert_stage`'s bindings) plus `bindings` (e.g.
"NEGATIVE_RATE = 0.5", "NEXT_SENTENCE_WEIGHT = 1.0"), written to OUT/runs/NAME; then for each
ICT seed the quickstart's ICT stage from it (OUT/runs/NAME_ict_seedS) and its Recall@5
(OUT/runs/NAME_ict_seedS_recall_dev). ICT's outcome is decided by the BERT stage it starts
from (experiment log E65), so a BERT-stage change is judged by its ICT runs over seeds.
"""
import sys
from pathlib import Path

from realm_bench import stages as stages_lib


def run(out: Path, name: str, ict_seeds: list[int], bindings: list[str]) -> None:
  stages = stages_lib.Stages(out, stages_lib.QuickstartConfig())
  bert = stages_lib.bert_stage(stages, name=name, extra=bindings)
  for seed in ict_seeds:
    ict = stages_lib.ict_stage(stages, bert, name=f"{name}_ict_seed{seed}",
                               extra=[f"SEED = {seed}"])
    stages.recall(f"{name}_ict_seed{seed}_recall_dev", "ict", ict)


if __name__ == "__main__":
  args = sys.argv[1:]
  seeds = [0, 1, 2]
  if "--ict-seeds" in args:
    at = args.index("--ict-seeds")
    seeds = [int(x) for x in args[at + 1].split(",")]
    del args[at:at + 2]
  if len(args) < 2:
    sys.exit(__doc__)
  run(Path(args[0]), args[1], seeds, args[2:])
