"""The question files users download (DrQA .txt, DPR .csv and biencoder .json, NQ-Open and
EfficientQA .jsonl) read into one shape, converted to the tasks' JSON lines, and bad rows named
file:line:field. Every file here is written in its published layout."""
from __future__ import annotations

import json

import pytest

from realm_bench.errors import InputError
from realm_bench.tasks import qa_files

# DrQA's WebQuestions/CuratedTrec .txt and NQ-Open's .jsonl: one JSON object per line.
DRQA_TXT = ('{"question": "what is the capital of france?", "answer": ["Paris"]}\n'
            '{"question": "who wrote hamlet?", "answer": ["Shakespeare", "William Shakespeare"]}\n')
# DPR's qa .csv: tab-separated, the answer list as a Python literal.
DPR_CSV = ("\"Big Bill\" Haywood led which union?\t['IWW']\n"
           "who wrote hamlet?\t['Shakespeare', \"O'Neill\"]\n")
# EfficientQA's test file: answers plus rater-judged predictions.
EFFICIENTQA = json.dumps({"question": "how many players on an nfl active roster",
                          "def_correct_predictions": ["fifty-three"],
                          "poss_correct_predictions": [], "answer": ["53"],
                          "answer_and_def_correct_predictions": ["53", "fifty-three"]}) + "\n"


def _biencoder(items) -> str:
  """DPR writes its biencoder files with json.dump(..., indent=4)."""
  return json.dumps([{"dataset": "nq_dev_psgs_w100", "question": q, "answers": a,
                      "positive_ctxs": [{"title": "T", "text": "x " * 50, "score": 1000,
                                         "title_score": 1, "passage_id": "1"}],
                      "negative_ctxs": [], "hard_negative_ctxs": []} for q, a in items],
                    indent=4)


@pytest.mark.parametrize("name, text, fmt", [
    ("CuratedTrec-test.txt", DRQA_TXT, "jsonl"),
    ("nq-test.csv", DPR_CSV, "dpr-qa"),
    ("biencoder-nq-dev.json", _biencoder([("q", ["a"])]), "dpr-biencoder"),
    ("tiny.json", "[\n]\n", "dpr-biencoder"),
])
def test_each_format_is_told_from_the_file(tmp_path, name, text, fmt):
  path = tmp_path / name
  path.write_text(text, encoding="utf-8")
  assert qa_files.sniff_format(path) == fmt


def test_a_file_of_no_known_format_is_refused(tmp_path):
  path = tmp_path / "vocab.txt"
  path.write_text("[PAD]\n[UNK]\n", encoding="utf-8")
  with pytest.raises(InputError, match="cannot tell the format"):
    qa_files.sniff_format(path)


def test_the_biencoder_array_is_streamed_with_each_questions_line(tmp_path, monkeypatch):
  monkeypatch.setattr(qa_files, "_CHUNK", 64)   # every element spans several chunks
  items = [(f"question {i} with \"quotes\" and é", [f"a{i}", "b"]) for i in range(20)]
  path = tmp_path / "biencoder-nq-train.json"
  path.write_text("\ufeff" + _biencoder(items), encoding="utf-8")
  rows = qa_files.read_rows(path)
  assert [(r.question, r.answers) for r in rows] == items
  lines = path.read_text(encoding="utf-8").splitlines()
  assert all(lines[r.line - 1].strip() == "{" for r in rows)
  assert f'"question": {json.dumps(items[7][0])}' in "\n".join(lines[rows[7].line:rows[8].line])


@pytest.mark.parametrize("text, line, reason", [
    ('[\n{"question": "a", "answers": ["b"]},\n{"question": "c", "answers": []}\n]', 3,
     "field 'answers': empty answer list"),
    ('[\n{"question": "a", "answers": ["b"]},\n{"answers": ["d"]}\n]', 3,
     "field 'question': missing"),
    ('[\n{"question": "a", "answers": ["b"]}\n{"question": "c", "answers": ["d"]}]', 3,
     "expected ',' or ']'"),
    ('[\n{"question": "a", "answers": ["b"]},\n{"question": "c", "answ', 3, "not valid JSON"),
    ('[\n{"question": "a", "answers": ["b"]},\n', 3, "not closed"),
])
def test_a_bad_biencoder_element_is_named_by_its_line(tmp_path, text, line, reason):
  path = tmp_path / "biencoder.json"
  path.write_text(text, encoding="utf-8")
  with pytest.raises(InputError, match=reason) as e:
    qa_files.read_rows(path)
  assert e.value.line == line and e.value.path == str(path)


def test_answer_field_picks_efficientqas_rated_answers(tmp_path):
  path = tmp_path / "NQ-open.efficientqa.test.1.1.jsonl"
  path.write_text(EFFICIENTQA, encoding="utf-8")
  assert qa_files.read_rows(path)[0].answers == ["53"]
  rows = qa_files.read_rows(path, answer_field="answer_and_def_correct_predictions")
  assert rows[0].answers == ["53", "fifty-three"]
  with pytest.raises(InputError, match="field 'nope': missing"):
    qa_files.read_rows(path, answer_field="nope")
  csv = tmp_path / "nq-test.csv"
  csv.write_text(DPR_CSV, encoding="utf-8")
  with pytest.raises(InputError, match="--answer-field"):
    qa_files.read_rows(csv, answer_field="answer_and_def_correct_predictions")
