"""A dense system's fine-tuning and evaluation under other reading settings (E93).

  python results/experiments/reading_variant.py OUT NAME [--orqa] [gin bindings...]
  python results/experiments/reading_variant.py OUT NAME --bm25 [--encoder RUN] [gin bindings...]
  python results/experiments/reading_variant.py OUT NAME --evaluate RUN [gin bindings...]

The first form fine-tunes the quickstart's REALM row (from OUT/runs/realm_pretrain; with
`--orqa`, ORQA's row from OUT/runs/ict) as the quickstart does, plus `bindings`, and evaluates
it with the same bindings: OUT/runs/NAME_finetune, NAME_eval_test, NAME_eval_dev. E.g.
"SPAN_RETRIEVAL_WEIGHT = 0.0" ranks spans by the reader alone, as the BM25 reader's are.
`--bm25` fine-tunes the BM25 reader's row instead (its reader from OUT/runs/bert, or from RUN's
reader with `--encoder RUN`), so that a setting such as a longer fine-tuning (E94) is given to
the baseline as well as to REALM.

`--evaluate RUN` trains nothing: it evaluates the fine-tuning run RUN under `bindings`
(NAME_eval_test, NAME_eval_dev), which separates what a setting does to prediction from what
it does to training.
"""
import sys
from pathlib import Path

from realm_bench import stages as stages_lib


def run(out: Path, name: str, bindings: list[str], *, orqa: bool = False,
        evaluate: Path | None = None, bm25: bool = False, encoder: Path | None = None) -> None:
  runs = out / "runs"
  bert = encoder or runs / "bert"
  warm = None if bm25 else runs / ("ict" if orqa else "realm_pretrain")
  for needed in [bert, warm, evaluate]:
    if needed and not (needed / "record.json").exists():
      sys.exit(f"{needed}: no record.json; OUT must be a finished quickstart folder and RUN "
               "a finished fine-tuning run")
  s = stages_lib.Stages(out, stages_lib.QuickstartConfig())
  experiment = "bm25_reader" if bm25 else "orqa" if orqa else "realm"
  overlays = [] if experiment == "realm" else [f"experiments/{experiment}.gin"]
  tuned = evaluate or s.train(
      f"{name}_finetune", ["runs/finetune.gin", *overlays],
      stages_lib.finetune_bindings(s.config, warm, bert, bindings), kind="finetune")
  for split, short in (("test", "test"), ("validation", "dev")):
    s.evaluate(f"{name}_eval_{short}", experiment, tuned, split, overlays, bindings=bindings)


if __name__ == "__main__":
  args = sys.argv[1:]
  flags = {}
  for flag in ("--orqa", "--bm25"):
    flags[flag] = flag in args
    if flags[flag]:
      args.remove(flag)
  paths = {}
  for option in ("--evaluate", "--encoder"):
    if option in args[:-1]:
      i = args.index(option)
      paths[option] = Path(args[i + 1])
      del args[i:i + 2]
  if len(args) < 2 or all(flags.values()) or ("--encoder" in paths and not flags["--bm25"]):
    sys.exit(__doc__)
  run(Path(args[0]), args[1], args[2:], orqa=flags["--orqa"], bm25=flags["--bm25"],
      evaluate=paths.get("--evaluate"), encoder=paths.get("--encoder"))
