"""The Open-QA question files people actually download, read into one shape.

The same benchmark reaches users in several layouts, and each tool that takes questions
(`data resplit`, `data convert`, `data check`, `score`) must read all of them the same way and
check them as the tasks do, or a file that converts cleanly could still fail at training time:

- "jsonl": one JSON object per line with a `question` and an answer list: NQ-Open's
  `NQ-open.*.jsonl` (EfficientQA's test file also has `answer_and_def_correct_predictions`,
  chosen with `answer_field`), DrQA's `WebQuestions-*.txt` / `CuratedTrec-*.txt`, ORQA's
  resplit files and the tasks' own `{split}.jsonl`.
- "dpr-qa": DPR's question files (`nq-test.csv`, `curatedtrec-test.csv`, ...), tab-separated
  despite the name, `question<TAB>answers` with the list as JSON or a Python literal.
- "dpr-biencoder": DPR's retriever training files (`biencoder-nq-dev.json`, ...), one JSON
  array of objects with `question`, `answers` and the passages. It is streamed: the training
  files are gigabytes of passages around a few kilobytes of questions.

Every row carries its line, so any problem is reported as file:line:field.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Iterator

from realm_bench.errors import InputError
from realm_bench.io_utils import json_object, read_lines
from realm_bench.tasks.data import check_answers, check_question, open_qa_tsv_row

FORMATS = ("jsonl", "dpr-qa", "dpr-biencoder")
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class QARow:
  line: int
  question: str
  answers: list[str]
  raw: str | None = None   # the JSON line as released ("jsonl"), kept so it can be copied


def sniff_format(path) -> str:
  """A file's format from how it starts: `[` then `{` (or `]`) is DPR's biencoder array, `{` a
  JSON line; otherwise a `.csv`/`.tsv` name or a tab in the first line means DPR's qa file."""
  path = Path(path)
  head = ""
  for _, line in read_lines(path):
    head += line.strip()
    if head and head != "[":   # a lone `[` may open DPR's array on its own line
      break
  if not head:
    return "jsonl"   # blank: nothing to read in any format; the caller says it has no questions
  if re.match(r"\[\s*[{\]]", head):
    return "dpr-biencoder"
  if head[0] == "{":
    return "jsonl"
  if path.suffix in (".csv", ".tsv") or "\t" in head:
    return "dpr-qa"
  raise InputError("cannot tell the format: expected JSON lines, a JSON array of objects "
                   "(DPR's biencoder files) or question<TAB>answers lines (DPR's .csv)",
                   path=path, line=1)


def check_format(fmt: str | None, answer_field: str) -> None:
  if fmt is not None and fmt not in FORMATS:
    raise InputError(f"expected one of {', '.join(FORMATS)}, got {fmt!r}", field="--format")
  if not isinstance(answer_field, str) or not answer_field:
    raise InputError(f"expected a field name, got {answer_field!r}", field="--answer-field")


def iter_checked(path, *, fmt: str | None = None,
                 answer_field: str = "answer") -> Iterator[QARow | InputError]:
  """Every question of the file, or the InputError of a bad one in its place, so a checker can
  report them all; a problem with the file as a whole (missing, not UTF-8, not a JSON array)
  is raised."""
  check_format(fmt, answer_field)
  path = Path(path)
  if not path.is_file():
    raise InputError("file does not exist" if not path.exists() else "not a regular file",
                     path=path)
  fmt = fmt or sniff_format(path)
  if fmt != "jsonl" and answer_field != "answer":
    raise InputError(f"only JSON lines have a choice of answer field; {fmt} files have one "
                     "answer list", field="--answer-field")
  if fmt == "dpr-biencoder":
    for lineno, obj in _json_array(path):
      yield _row_of(obj, path, lineno, "answers")
    return
  for lineno, line in read_lines(path):
    if not line.strip():
      continue
    try:
      if fmt == "dpr-qa":
        yield QARow(lineno, *open_qa_tsv_row(line, path, lineno))
      else:
        row = _row_of(json_object(line, path=path, line=lineno), path, lineno, answer_field)
        yield row if isinstance(row, InputError) else dataclasses.replace(row, raw=line)
    except InputError as e:
      yield e


def iter_rows(path, *, fmt: str | None = None, answer_field: str = "answer") -> Iterator[QARow]:
  """Every question of the file; the first bad one raises its InputError."""
  for row in iter_checked(path, fmt=fmt, answer_field=answer_field):
    if isinstance(row, InputError):
      raise row
    yield row


def read_rows(path, *, fmt: str | None = None, answer_field: str = "answer") -> list[QARow]:
  rows = list(iter_rows(path, fmt=fmt, answer_field=answer_field))
  if not rows:
    raise InputError("no questions in the file", path=path)
  return rows


def _row_of(obj, path, lineno: int, answer_field: str) -> QARow | InputError:
  if not isinstance(obj, dict):
    return InputError("expected a JSON object", path=path, line=lineno)
  for key in ("question", answer_field):
    if key not in obj:
      return InputError("missing", path=path, line=lineno, field=key)
  try:
    return QARow(lineno, check_question(obj["question"], path, lineno),
                 check_answers(obj[answer_field], path, lineno, field=answer_field))
  except InputError as e:
    return e


def _json_array(path: Path) -> Iterator[tuple[int, object]]:
  """(line where it starts, element) of a file holding one JSON array, read in chunks."""
  decoder = json.JSONDecoder()
  buf, pos, lines_before, at_eof = "", 0, 0, False
  with open(path, encoding="utf-8-sig") as f:   # -sig: a byte-order mark is dropped

    def more() -> bool:
      nonlocal buf, pos, lines_before, at_eof
      try:
        chunk = f.read(_CHUNK)
      except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text ({e.reason}); re-encode the file as UTF-8",
                         path=path, line=lines_before + buf.count("\n") + 1) from None
      lines_before += buf.count("\n", 0, pos)
      buf, pos, at_eof = buf[pos:] + chunk, 0, not chunk
      return bool(chunk)

    def skip_space() -> str:
      nonlocal pos
      while True:
        while pos < len(buf) and buf[pos].isspace():
          pos += 1
        if pos < len(buf) or not more():
          return buf[pos] if pos < len(buf) else ""

    def line_at(at: int) -> int:
      return lines_before + buf.count("\n", 0, at) + 1

    more()
    if skip_space() != "[":
      raise InputError("expected a JSON array (DPR's biencoder format)", path=path, line=1)
    pos += 1
    first = True
    while True:
      ch = skip_space()
      if ch == "]":
        return
      if not first:
        if ch == ",":
          pos += 1
          ch = skip_space()
        elif ch:
          raise InputError(f"expected ',' or ']' between array elements, got {ch!r}",
                           path=path, line=line_at(pos))
      if not ch:
        raise InputError("the array is not closed (a truncated download?)", path=path,
                         line=line_at(pos))
      first = False
      start = pos
      while True:
        try:
          obj, end = decoder.raw_decode(buf, start)
          break
        except json.JSONDecodeError as e:
          if at_eof or not more():
            raise InputError(f"not valid JSON ({e.msg})", path=path,
                             line=line_at(e.pos)) from None
          start = pos
      yield line_at(start), obj
      pos = end
