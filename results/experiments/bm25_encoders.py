"""E84's rows for one world: which part of REALM's gap to the BM25 reader is the retriever's
and which the encoder's, from `encoder_control.py` runs made on one machine.

  python results/experiments/bm25_encoders.py WORLD DIR [DIR ...]

Each record is looked up in the DIRs in order (a world's E84 runs, then the folder holding its
ICT + REALM-encoder run when that was made earlier). Names: bert_bm25 (BM25's blocks, the BERT
stage's reader), random_bm25 and retrieved_bm25 (BM25's blocks, the encoder of REALM
pre-training on random or retrieved blocks), retrieved_enc (ICT's blocks, REALM's encoder);
each as NAME_eval_test and NAME_eval_dev. Differences are paired over the same questions.
"""
import sys
from pathlib import Path

from realm_bench.reporting import summary
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


def rows(world: str, dirs: list[Path]) -> list[str]:
  out = []
  for split in ("test", "dev"):
    rec = {s: _find(dirs, f"{s}_eval_{split}") for s in SYSTEMS}
    cells = [f"{rec[s].metrics['exact_match']:.1f}" for s in SYSTEMS]
    for a, b in DIFFERENCES:
      found = summary.paired_difference(rec[a], rec[b])
      if found is None:
        sys.exit(f"{a} and {b} ({split}): no per-question outcomes over the same questions")
      cells.append(f"{found[0]:+.1f} ± {found[1]:.1f}")
    out.append(f"| {world} | {split} | " + " | ".join(cells) + " |")
  return out


if __name__ == "__main__":
  if len(sys.argv) < 3:
    sys.exit(__doc__)
  print(HEADER)
  print("|---|---|" + "---:|" * (len(SYSTEMS) + len(DIFFERENCES)))
  print("\n".join(rows(sys.argv[1], [Path(d) for d in sys.argv[2:]])))
