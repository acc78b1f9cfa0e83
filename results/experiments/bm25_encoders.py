"""E84's table: which part of REALM's gap to the BM25 reader is the retriever's and which the
encoder's, from `encoder_control.py` runs made on one machine per world.

  python results/experiments/bm25_encoders.py WORLD:DIR[,DIR...] [WORLD:DIR[,DIR...] ...]

A world's records are looked up in its DIRs in order (its E84 runs, then the folder holding its
ICT + REALM-encoder run when that was made earlier). Names: bert_bm25 (BM25's blocks, the BERT
stage's reader), random_bm25 and retrieved_bm25 (BM25's blocks, the encoder of REALM
pre-training on random or retrieved blocks), retrieved_enc (ICT's blocks, REALM's encoder);
each as NAME_eval_test and NAME_eval_dev. Differences are paired over the same questions; with
two worlds or more, each difference's mean over the worlds and its 95% t-interval follow.
"""
import sys
from pathlib import Path

from realm_bench.reporting import stats, summary
from realm_bench.reporting.records import RECORD_NAME, read_record

SYSTEMS = ("retrieved_enc", "bert_bm25", "random_bm25", "retrieved_bm25")
# (A, B): the retriever's cost with REALM's encoder, the encoder's gain and retrieval's part in it.
DIFFERENCES = (("retrieved_bm25", "retrieved_enc"), ("retrieved_bm25", "bert_bm25"),
               ("random_bm25", "bert_bm25"), ("retrieved_bm25", "random_bm25"))
HEADER = ("| world | split | ICT + REALM encoder | BM25 + BERT reader | BM25 + random-block "
          "encoder | BM25 + REALM encoder | BM25 − ICT (REALM encoder) | REALM encoder − BERT "
          "(BM25) | random-block encoder − BERT (BM25) | retrieved − random blocks (BM25) |")


def _find(dirs, name):
  for d in dirs:
    if (d / name / RECORD_NAME).exists():
      return read_record(d / name / RECORD_NAME)
  sys.exit(f"{name}: no {RECORD_NAME} in any of {', '.join(map(str, dirs))}")


def rows(world: str, dirs: list[Path]) -> tuple[list[str], dict[tuple[str, int], float]]:
  """The world's two table rows, and its differences by (split, index into DIFFERENCES)."""
  out, diffs = [], {}
  for split in ("test", "dev"):
    rec = {s: _find(dirs, f"{s}_eval_{split}") for s in SYSTEMS}
    cells = [f"{rec[s].metrics['exact_match']:.1f}" for s in SYSTEMS]
    for i, (a, b) in enumerate(DIFFERENCES):
      found = summary.paired_difference(rec[a], rec[b])
      if found is None:
        sys.exit(f"{a} and {b} ({split}): no per-question outcomes over the same questions")
      diffs[split, i] = found[0]
      cells.append(f"{found[0]:+.1f} ± {found[1]:.1f}")
    out.append(f"| {world} | {split} | " + " | ".join(cells) + " |")
  return out, diffs


def over_worlds(per_world: list[dict[tuple[str, int], float]]) -> list[str]:
  lines = []
  for split in ("test", "dev"):
    for i, (a, b) in enumerate(DIFFERENCES):
      values = [d[split, i] for d in per_world]
      iv = stats.t_interval(values, confidence=0.95, what="worlds")
      lines.append(f"{split}: {a} − {b}: mean {sum(values) / len(values):+.1f} "
                   f"[{iv.low:+.1f}, {iv.high:+.1f}] ({iv.method})")
  return lines


def _world(arg: str) -> tuple[str, list[Path]]:
  world, sep, dirs = arg.partition(":")
  if not sep or not world or not dirs:
    sys.exit(f"{arg!r}: expected WORLD:DIR[,DIR...]\n{__doc__}")
  return world, [Path(d) for d in dirs.split(",")]


def main(args: list[str]) -> None:
  print(HEADER)
  print("|---|---|" + "---:|" * (len(SYSTEMS) + len(DIFFERENCES)))
  per_world = []
  for world, dirs in map(_world, args):
    table, diffs = rows(world, dirs)
    print("\n".join(table))
    per_world.append(diffs)
  if len(per_world) >= 2:
    print("\n".join(over_worlds(per_world)))


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  main(sys.argv[1:])
