"""An ICT-stage variant from a quickstart's BERT run, and its zero-shot recall.

  python results/experiments/ict_variant.py OUT NAME [gin bindings...]

The quickstart's ICT stage (`stages.ict_stage`'s bindings) plus `bindings` (e.g. "SEED = 1"),
written to OUT/runs/NAME and OUT/runs/NAME_recall_dev: for how often ICT lands in a solution
that does not carry over to questions (experiment log E65), which a single ICT run per world
cannot tell.
"""
import sys
from pathlib import Path

from realm_bench import stages as stages_lib


def run(out: Path, name: str, bindings: list[str]) -> None:
  stages = stages_lib.Stages(out, stages_lib.QuickstartConfig())
  run_dir = stages_lib.ict_stage(stages, out / "runs" / "bert", name=name, extra=bindings)
  stages.recall(name + "_recall_dev", "ict", run_dir)


if __name__ == "__main__":
  if len(sys.argv) < 3:
    sys.exit(__doc__)
  run(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
