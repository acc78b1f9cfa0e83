"""A copy of a finished quickstart folder that keeps everything before fine-tuning, so the
quickstart can be rerun there with other fine-tuning settings from the same pre-trained runs.

  python results/experiments/finetune_variant.py OUT NEW
  realm-bench quickstart --out NEW [OUT's world flags] --gin.QuickstartConfig.finetune_steps=900

NEW links OUT's world and vocabulary and copies its reference points, BERT, ICT and REALM
pre-training runs and their recall stages (copies, not links: the summary finds records by
walking `runs/`, which does not follow links; they are tens of MB); the fine-tunings and their
evaluations are left out, so the quickstart runs them again under the new bindings (it skips a
stage whose record exists). The compile cache is not linked, so the fine-tunings' times
compare with OUT's, which compiled their programs too.
"""
import json
import shutil
import sys
from pathlib import Path

_FINE_TUNED = ("_finetune", "_eval_test", "_eval_dev")


def main(out: str, new: str) -> None:
  out, new = Path(out).resolve(), Path(new)
  if not (out / "runs/realm_pretrain/record.json").exists():
    sys.exit(f"{out}: no runs/realm_pretrain/record.json; is this a finished quickstart folder?")
  if new.exists():
    sys.exit(f"{new}: exists; give a new folder")
  # Built under a temporary name and renamed, so an interrupted call leaves no folder that
  # looks finished.
  tmp = new.with_name(new.name + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  (tmp / "runs").mkdir(parents=True)
  (tmp / "world").symlink_to(out / "world")
  (tmp / "vocab.txt").symlink_to(out / "vocab.txt")
  kept = sorted(run.name for run in (out / "runs").iterdir()
                if not run.name.endswith(_FINE_TUNED))
  for name in kept:
    shutil.copytree(out / "runs" / name, tmp / "runs" / name)
  tmp.rename(new)
  print(json.dumps({"copied": kept}))


if __name__ == "__main__":
  if len(sys.argv) != 3:
    sys.exit(__doc__)
  main(*sys.argv[1:])
