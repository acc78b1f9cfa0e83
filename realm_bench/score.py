"""`realm-bench score`: ORQA's evaluate_predictions, with the cases it passes over silently reported.

Predictions are keyed by question text and a later line overwrites an earlier one, as in the
official script. References are scored per line: the official script keys them by question too,
so a question repeated in the reference file counts once there (its last answer list wins). The
two agree whenever the reference file has no repeated question, which is the case the reported
numbers come from; when it has some, the summary gives both and says how many lines repeat.
A reference with no prediction is wrong and named, not dropped, so a truncated predictions file
cannot inflate the score. References may be in any layout `data convert` reads, and
`answer_field` picks the answer list as the official script's `--answer_field` does (EfficientQA's
test file: `answer_and_def_correct_predictions`).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_jsonl, dumps, read_jsonl
from realm_bench.tasks import metrics, qa_files

# How many missing questions the report names; the count is always complete.
_NAMED_MISSING = 5


@dataclasses.dataclass(frozen=True)
class _Reference:
  line: int
  question: str
  answers: list[str]


def _read_lines(path, required):
  path = Path(path)
  if path.exists() and not path.is_file():
    raise InputError("not a regular file", path=path)
  try:
    yield from read_jsonl(path, required=required)
  except UnicodeDecodeError as e:
    raise InputError(f"not UTF-8 text ({e.reason})", path=path) from None


def _string(obj: dict, key: str, path, line: int) -> str:
  value = obj[key]
  if not isinstance(value, str):
    raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=line,
                     field=key)
  return value


def _read_references(path, answer_field: str) -> list[_Reference]:
  """Any question file `tasks/qa_files.py` reads (NQ-Open / EfficientQA / DrQA JSON lines,
  DPR's .csv and biencoder .json), checked as the tasks check them."""
  path = Path(path)
  if path.exists() and not path.is_file():
    raise InputError("not a regular file", path=path)
  references = [_Reference(row.line, row.question, row.answers)
                for row in qa_files.iter_rows(path, answer_field=answer_field)]
  if not references:
    raise InputError("no references: the file has no questions", path=path)
  return references


def _read_predictions(path) -> tuple[dict[str, str], int, int]:
  """Returns (question -> prediction, repeated lines, repeated lines that changed the value)."""
  predictions: dict[str, str] = {}
  repeated = changed = 0
  for line, obj in _read_lines(path, ("question", "prediction")):
    question = _string(obj, "question", path, line)
    prediction = _string(obj, "prediction", path, line)
    if question in predictions:
      repeated += 1
      changed += predictions[question] != prediction
    predictions[question] = prediction
  return predictions, repeated, changed


def _score_dict(score: metrics.Score) -> dict:
  return {"num_correct": score.num_correct, "num_total": score.num_total,
          "exact_match": score.exact_match_percent}


def score_files(*, references, predictions, regex: bool = False, per_example=None,
                answer_field: str = "answer") -> dict:
  """Scores a predictions file against a references file; returns the summary it prints."""
  if per_example is not None and Path(per_example).is_dir():
    raise InputError("--per-example names a folder; give the JSONL file to write",
                     path=per_example)
  refs = _read_references(references, answer_field)
  preds, repeated_predictions, changed_predictions = _read_predictions(predictions)

  rows, missing = [], []
  latest: dict[str, list[str]] = {}  # the official reading: last answer list per question
  repeated_references = changed_references = 0
  for ref in refs:
    if ref.question in latest:
      repeated_references += 1
      changed_references += latest[ref.question] != ref.answers
    latest[ref.question] = ref.answers
    prediction = preds.get(ref.question)
    if prediction is None:
      missing.append(ref.question)
    correct = prediction is not None and metrics.is_correct(prediction, ref.answers, regex=regex)
    rows.append({"question": ref.question, "answer": ref.answers, "prediction": prediction,
                 "correct": correct})

  per_line = metrics.Score(sum(r["correct"] for r in rows), len(rows))
  per_question = metrics.Score(
      sum(q in preds and metrics.is_correct(preds[q], a, regex=regex) for q, a in latest.items()),
      len(latest))
  uncompilable = (sum(not metrics.pattern_compiles(p) for r in refs for p in r.answers)
                  if regex else 0)
  summary = {
      "references": str(references),
      "predictions": str(predictions),
      "metric": "regex_match" if regex else "exact_match",
      "answer_field": answer_field,
      # The official evaluation keys references by question text: a repeated question counts
      # once, with its last answer list. That is the headline; per-line scoring is reported too.
      **_score_dict(per_question),
      "missing_predictions": len(missing),
      "missing_questions": missing[:_NAMED_MISSING],
      "duplicate_reference_lines": repeated_references,
      "duplicate_references_disagreeing": changed_references,
      "duplicate_prediction_lines": repeated_predictions,
      "duplicate_predictions_disagreeing": changed_predictions,
      "unused_predictions": sum(q not in latest for q in preds),
      "uncompilable_patterns": uncompilable,
      "per_reference_line": _score_dict(per_line),
  }
  if per_example is not None:
    try:
      atomic_write_jsonl(per_example, rows)
    except OSError as e:   # an unwritable folder, a full disk: nothing is left half-written
      raise InputError(f"cannot write the per-example file ({e.strerror})",
                       path=per_example) from None
  return summary


def format_summary(summary: dict) -> str:
  """The human-readable report, then the summary as one JSON line for scripts."""
  lines = [
      f"metric: {summary['metric']}",
      f"num_correct: {summary['num_correct']}",
      f"num_total: {summary['num_total']}",
      f"exact_match: {summary['exact_match']:.2f}",
  ]
  missing = summary["missing_predictions"]
  named = ", ".join(repr(q) for q in summary["missing_questions"])
  lines.append(f"missing_predictions: {missing}" +
               (f" (counted wrong; first: {named})" if missing else ""))
  lines.append(f"duplicate_prediction_lines: {summary['duplicate_prediction_lines']} "
               f"(merged, the later line wins; {summary['duplicate_predictions_disagreeing']} "
               "disagreeing)")
  lines.append(f"duplicate_reference_lines: {summary['duplicate_reference_lines']} "
               f"(merged as the official evaluation does, the later answer list wins; "
               f"{summary['duplicate_references_disagreeing']} disagreeing)")
  if summary["duplicate_reference_lines"]:
    line = summary["per_reference_line"]
    lines.append(f"score counting every reference line instead: "
                 f"{line['num_correct']}/{line['num_total']} = {line['exact_match']:.2f}")
  if summary["unused_predictions"]:
    lines.append(f"unused_predictions: {summary['unused_predictions']} "
                 "(questions not in the references)")
  if summary["uncompilable_patterns"]:
    lines.append(f"uncompilable_patterns: {summary['uncompilable_patterns']} "
                 "(never match, as in the official evaluation)")
  lines.append(dumps(summary, sort_keys=True))
  return "\n".join(lines)
