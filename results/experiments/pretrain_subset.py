"""A copy of a quickstart folder whose REALM pre-training text is a subset of the world's, for
REALM variants from the same BERT and ICT runs (then `realm_variant.py NEW realm`).

  python results/experiments/pretrain_subset.py OUT NEW name|alias|random

`name` keeps the sentences that name their subject by name, `alias` those that name it by its
alias (`WorldConfig.alias_fraction`), `random` a seeded random subset as large as `name`'s, the
control for the smaller text. NEW links OUT's world files, vocabulary, BERT and ICT runs; only
`world/pretrain/sentences.jsonl` is new.
"""
import json
import random
import re
import shutil
import sys
from pathlib import Path

from realm_bench.io_utils import read_jsonl


def _uses_alias(world: Path) -> list[bool]:
  alias_of = {}
  for _, entity in read_jsonl(world / "truth/entities.jsonl"):
    if "alias" not in entity:
      sys.exit(f"{world / 'truth/entities.jsonl'}: entities have no `alias`; this world was made "
               "with WorldConfig.alias_fraction = 0")
    for block in entity["block_ids"]:
      alias_of[block] = entity["alias"]
  return [bool(re.search(rf"\b{re.escape(alias_of[s['block_id']])}\b", s["text"]))
          for _, s in read_jsonl(world / "pretrain/sentences.jsonl")]


def main(out: str, new: str, keep: str) -> None:
  out, new = Path(out).resolve(), Path(new)
  if not (out / "world/pretrain/sentences.jsonl").exists():
    sys.exit(f"{out}: no world/pretrain/sentences.jsonl; is this a quickstart folder?")
  if new.exists():
    sys.exit(f"{new}: exists; give a new folder")
  lines = (out / "world/pretrain/sentences.jsonl").read_text(encoding="utf-8").splitlines()
  alias = _uses_alias(out / "world")
  by_name = [line for line, a in zip(lines, alias) if not a]
  chosen = {"name": by_name,
            "alias": [line for line, a in zip(lines, alias) if a],
            "random": random.Random(0).sample(lines, len(by_name))}[keep]
  # Built under a temporary name and renamed, so an interrupted call leaves no folder that
  # looks finished.
  tmp = new.with_name(new.name + ".tmp")
  shutil.rmtree(tmp, ignore_errors=True)
  (tmp / "world/pretrain").mkdir(parents=True)
  (tmp / "runs").mkdir()
  for item in (out / "world").iterdir():
    if item.name != "pretrain":
      (tmp / "world" / item.name).symlink_to(item)
  (tmp / "world/pretrain/sentences.jsonl").write_text("\n".join(chosen) + "\n", encoding="utf-8")
  (tmp / "vocab.txt").symlink_to(out / "vocab.txt")
  for run in ("bert", "ict", "ict_recall_dev"):
    (tmp / "runs" / run).symlink_to(out / "runs" / run)
  tmp.rename(new)
  print(json.dumps({"sentences": len(lines), "by_alias": sum(alias), "kept": len(chosen)}))


if __name__ == "__main__":
  if len(sys.argv) != 4 or sys.argv[3] not in ("name", "alias", "random"):
    sys.exit(__doc__)
  main(*sys.argv[1:])
