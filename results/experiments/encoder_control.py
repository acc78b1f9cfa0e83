"""Table 2's baseline-retriever row with any encoder as its reader, and the encoder that
controls for REALM pre-training's compute.

  python results/experiments/encoder_control.py OUT NAME --encoder RUN
  python results/experiments/encoder_control.py OUT NAME --continue-bert
  python results/experiments/encoder_control.py OUT NAME --encoder RUN --bm25
  ... [--extra_gin=FILE ...]

ICT's retriever (OUT/runs/ict) and the reader of RUN are fine-tuned and evaluated on the NQ
twin as the quickstart's systems are (`stages.finetune_bindings`): OUT/runs/NAME_finetune,
NAME_eval_test, NAME_eval_dev. With `--encoder OUT/runs/realm_pretrain` it is the quickstart's
"baseline retriever + REALM encoder" row; with a `realm_variant.py --random` run, E79's
random-block control.

`--bm25` reads BM25's blocks instead (the quickstart's BM25 + reader with RUN's reader in place
of the BERT stage's): with the REALM encoder it splits REALM's gap to the BM25 reader into what
the retriever costs and what the encoder gains.

`--continue-bert` first trains the BERT stage on (OUT/runs/NAME_bert) for REALM pre-training's
budget, `pretrain_steps` x `pretrain_batch` sequences at its learning rate and warm-up, on the
pre-training sentences alone with BERT's own objective (no blocks), and uses that as RUN: the
control for what the REALM encoder gains from training longer on the same text (E81).

`--extra_gin=FILE` (repeatable) is the quickstart's `QuickstartConfig.extra_gin` of OUT's run:
its towers' size overlay (e.g. results/experiments/tiny_wide.gin, E102), without which the
fine-tuning would build the quickstart's tiny towers around another size's checkpoints.
"""
import sys
from pathlib import Path

from realm_bench import stages as stages_lib


def continue_bert(s: stages_lib.Stages, name: str) -> Path:
  c = s.config
  bert = s.runs / "bert"
  return stages_lib.bert_stage(s, name=name, extra=[
      f"NUM_STEPS = {c.pretrain_steps}", f"BATCH_SIZE = {c.pretrain_batch}",
      f"LEARNING_RATE = {c.pretrain_lr}", f"WARMUP_STEPS = {c.pretrain_steps // 10}",
      "CORPUS_TASK = None",
      f"train_lib.train.warm_starts = [('{bert}', {{'reader': 'reader', 'mlm_head': 'mlm_head'}})]"])


def run(out: Path, name: str, encoder: Path | None, bm25: bool = False,
        extra_gin: tuple[str, ...] = ()) -> None:
  # Refused before anything is trained, rather than a traceback from the warm start.
  for needed in [out / "runs" / "bert", out / "runs" / "ict"] + ([encoder] if encoder else []):
    if not (needed / "record.json").exists():
      sys.exit(f"{needed}: no record.json; OUT must be a quickstart folder and RUN a finished run")
  s = stages_lib.Stages(out, stages_lib.QuickstartConfig(extra_gin=tuple(extra_gin)))
  if encoder is None:
    encoder = continue_bert(s, f"{name}_bert")
  if bm25:
    # bm25_reader.gin warm-starts the reader from BERT_RUN; nothing else is warm-started.
    tuned = s.train(f"{name}_finetune", ["runs/finetune.gin", "experiments/bm25_reader.gin"],
                    stages_lib.finetune_bindings(s.config, None, encoder), kind="finetune")
    for split, short in (("test", "test"), ("validation", "dev")):
      s.evaluate(f"{name}_eval_{short}", "bm25_reader", tuned, split,
                 ["experiments/bm25_reader.gin"])
    return
  tuned = s.train(f"{name}_finetune",
                  ["runs/finetune.gin", "experiments/baseline_retriever_realm_encoder.gin"],
                  stages_lib.finetune_bindings(s.config, s.runs / "ict", s.runs / "bert",
                                               [f"REALM_RUN = '{encoder}'"]), kind="finetune")
  for split, short in (("test", "test"), ("validation", "dev")):
    s.evaluate(f"{name}_eval_{short}", "baseline_retriever_realm_encoder", tuned, split)


if __name__ == "__main__":
  extra = tuple(a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--extra_gin="))
  args = [a for a in sys.argv[1:] if not a.startswith("--extra_gin=")]
  for overlay in extra:
    if not Path(overlay).is_file():
      sys.exit(f"--extra_gin={overlay}: no such file (give the overlay OUT's quickstart ran with)")
  if len(args) in (4, 5) and args[2] == "--encoder" and args[4:] in ([], ["--bm25"]):
    run(Path(args[0]), args[1], Path(args[3]), bm25=len(args) == 5, extra_gin=extra)
  elif len(args) == 3 and args[2] == "--continue-bert":
    run(Path(args[0]), args[1], None, extra_gin=extra)
  else:
    sys.exit(__doc__)
