"""ORQA's train / dev / test splits of the Open-QA benchmarks, made from the released files.

The benchmarks ship a train and a test set; ORQA (and REALM after it) hold out a dev split
from train by hashing each question: a question is dev when
`tf.strings.to_hash_bucket_fast(question, 100000) % 10 == 0` (ORQA's
`preprocessing/create_data_splits.py`); the test split is the released test (for NQ-Open,
its dev file). The same TensorFlow hash is used here, so the splits are ORQA's question for
question, and the counts can be checked against the sizes the papers report.

Inputs are any of the formats `tasks/qa_files.py` reads: JSON lines with a `question` and an
`answer` list (NQ-Open's, DrQA's WebQuestions / CuratedTrec `.txt`) are written out unchanged
as ORQA writes them; DPR's `question<TAB>answers` `.csv` and biencoder `.json` files are
converted to the JSON lines the tasks read.
"""
from __future__ import annotations

import json
from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text
from realm_bench.tasks import qa_files
from realm_bench.tasks.data import EXPECTED_ROWS

DEV_BUCKETS, DEV_MODULUS = 100000, 10
# --name values and the folders (open_qa/FOLDER) of the tasks that read them.
NAMES = {"nq": "nq", "naturalquestions": "nq", "wq": "wq", "webquestions": "wq",
         "trec": "trec", "curatedtrec": "trec"}


def dev_buckets(questions: list[str]) -> list[int]:
  """ORQA's bucket of each question (0 means dev)."""
  from realm_bench.tf_runtime import tf  # pylint: disable=g-import-not-at-top
  if not questions:
    return []
  hashed = tf.strings.to_hash_bucket_fast(tf.constant(questions), DEV_BUCKETS)
  return [int(h) % DEV_MODULUS for h in hashed.numpy()]


def _read_rows(path: Path) -> list[tuple[str, str]]:
  """(question, JSON line to write) per question, checked as the tasks check them: JSON lines
  are copied as released, other formats (`tasks/qa_files.py`) become the tasks' JSON lines."""
  return [(row.question, row.raw if row.raw is not None else
           json.dumps({"question": row.question, "answer": row.answers}, ensure_ascii=False))
          for row in qa_files.read_rows(path)]


def resplit(*, name: str, train: str, test: str, out: str) -> dict[str, int]:
  """Writes OUT/{train,dev,test}.jsonl (OUT is DATA_DIR/open_qa/FOLDER); returns the counts
  and says where they differ from the released sizes."""
  folder = NAMES.get(name.lower())
  if folder is None:
    raise InputError(f"unknown benchmark {name!r}; expected one of {', '.join(NAMES)}",
                     field="--name")
  train_rows, test_rows = _read_rows(Path(train)), _read_rows(Path(test))
  buckets = dev_buckets([q for q, _ in train_rows])
  splits = {"train": [line for (_, line), b in zip(train_rows, buckets) if b != 0],
            "dev": [line for (_, line), b in zip(train_rows, buckets) if b == 0],
            "test": [line for _, line in test_rows]}
  out_dir = Path(out)
  out_dir.mkdir(parents=True, exist_ok=True)
  for split, lines in splits.items():
    atomic_write_text(out_dir / f"{split}.jsonl", "".join(line + "\n" for line in lines))
  counts = {split: len(lines) for split, lines in splits.items()}
  counts["differs_from_released"] = {
      split: EXPECTED_ROWS[(folder, split)] for split, n in counts.items()
      if (folder, split) in EXPECTED_ROWS and EXPECTED_ROWS[(folder, split)] != n}
  return counts
