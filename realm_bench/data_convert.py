"""`realm-bench data convert`: a question file in any layout users have, as the tasks' JSON lines.

The tasks read `{"question", "answer": [...]}` per line; people download DrQA's `.txt`, DPR's
`.csv` and biencoder `.json`, NQ-Open's and EfficientQA's `.jsonl`. Converting checks every
row as the tasks would (a bad one is named file:line:field and nothing is written), so a file
that converts is a file that trains. It does not split: ORQA's dev split is `data resplit`'s.
"""
from __future__ import annotations

from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text, dumps
from realm_bench.tasks import qa_files


def convert_questions(*, source: str, out: str, fmt: str | None = None,
                      answer_field: str = "answer") -> dict:
  """Writes OUT as JSON lines {"question", "answer"} in the source's order; returns counts."""
  source_path, out_path = Path(source), Path(out)
  if out_path.is_dir():
    raise InputError("names a folder; give the .jsonl file to write (e.g. "
                     "DATA_DIR/open_qa/nq/test.jsonl)", path=out_path, field="--out")
  if out_path.exists() and out_path.resolve() == source_path.resolve():
    raise InputError("is the file being converted", path=out_path, field="--out")
  qa_files.check_format(fmt, answer_field)
  fmt = fmt or qa_files.sniff_format(source_path)
  rows = qa_files.read_rows(source_path, fmt=fmt, answer_field=answer_field)
  atomic_write_text(out_path, "".join(
      dumps({"question": r.question, "answer": r.answers}) + "\n" for r in rows))
  return {"source": str(source_path), "format": fmt, "answer_field": answer_field,
          "out": str(out_path), "rows": len(rows),
          "questions": len({r.question for r in rows})}
