"""`realm-bench score`: official counts, reported gaps and duplicates, and clean bad-input errors."""
from __future__ import annotations

import json

import pytest

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.score import score_files


def _write_jsonl(path, rows):
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                  encoding="utf-8")
  return path


def _json_summary(stdout: str) -> dict:
  return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture
def refs(tmp_path):
  return _write_jsonl(tmp_path / "refs.jsonl", [
      {"question": "q1", "answer": ["Paris"]},
      {"question": "q2", "answer": ["1873", "1874"]},
      {"question": "q3", "answer": ["the moon"]},
      {"question": "q4", "answer": ["x"]},
  ])


def test_counts_and_missing_predictions_are_reported(tmp_path, refs, capsys):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [
      {"question": "q1", "prediction": "paris."},
      {"question": "q2", "prediction": "1875"},
      {"question": "q3", "prediction": "Moon"},
      {"question": "extra", "prediction": "?"},
  ])
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds)]) == 0
  out = capsys.readouterr().out
  assert "num_correct: 2" in out and "num_total: 4" in out and "exact_match: 50.00" in out
  assert "missing_predictions: 1" in out and "'q4'" in out
  summary = _json_summary(out)
  assert summary["num_correct"] == 2 and summary["num_total"] == 4
  assert summary["exact_match"] == 50.0
  assert summary["missing_predictions"] == 1 and summary["missing_questions"] == ["q4"]
  assert summary["unused_predictions"] == 1
  assert summary["metric"] == "exact_match"


def test_duplicate_predictions_merge_with_the_later_line_winning(tmp_path, refs):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [
      {"question": "q1", "prediction": "Lyon"},
      {"question": "q1", "prediction": "Paris"},  # overwrites: now correct
      {"question": "q2", "prediction": "1873"},
      {"question": "q2", "prediction": "1873"},  # same value
      {"question": "q3", "prediction": "moon"},
      {"question": "q4", "prediction": "x"},
  ])
  summary = score_files(references=refs, predictions=preds)
  assert summary["num_correct"] == 4
  assert summary["duplicate_prediction_lines"] == 2
  assert summary["duplicate_predictions_disagreeing"] == 1


def test_duplicate_references_are_merged_as_officially_and_reported(tmp_path, capsys):
  refs = _write_jsonl(tmp_path / "refs.jsonl", [
      {"question": "q1", "answer": ["Paris"]},
      {"question": "q1", "answer": ["Lyon"]},
      {"question": "q2", "answer": ["x"]},
  ])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [
      {"question": "q1", "prediction": "Paris"},
      {"question": "q2", "prediction": "x"},
  ])
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds)]) == 0
  out = capsys.readouterr().out
  summary = _json_summary(out)
  # The official script keys references by question: the last answer list ("Lyon") wins.
  assert (summary["num_correct"], summary["num_total"]) == (1, 2)
  assert summary["exact_match"] == 50.0
  assert summary["duplicate_reference_lines"] == 1
  assert summary["duplicate_references_disagreeing"] == 1
  assert summary["per_reference_line"] == {"num_correct": 2, "num_total": 3,
                                           "exact_match": pytest.approx(200 / 3)}
  assert "counting every reference line" in out


def test_regex_path(tmp_path, capsys):
  refs = _write_jsonl(tmp_path / "CuratedTrec-test.jsonl", [
      {"question": "q1", "answer": ["18[0-9]{2}"]},
      {"question": "q2", "answer": ["paris"]},
      {"question": "q3", "answer": ["(broken"]},
      {"question": "q4", "answer": ["1873"]},
  ])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [
      {"question": "q1", "prediction": "1873"},
      {"question": "q2", "prediction": "PARIS, France"},
      {"question": "q3", "prediction": "(broken"},
      {"question": "q4", "prediction": " 1873"},
  ])
  out = tmp_path / "per_example.jsonl"
  args = ["score", "--references", str(refs), "--predictions", str(preds), "--per-example",
          str(out)]

  def correct():
    return [json.loads(line)["correct"] for line in out.read_text().splitlines()]

  assert cli.main(args + ["--regex"]) == 0
  summary = _json_summary(capsys.readouterr().out)
  assert summary["metric"] == "regex_match"
  assert (summary["num_correct"], summary["num_total"]) == (2, 4)
  assert summary["uncompilable_patterns"] == 1
  assert correct() == [True, True, False, False]
  # The same files under exact match: normalisation, not patterns.
  assert cli.main(args) == 0
  assert _json_summary(capsys.readouterr().out)["uncompilable_patterns"] == 0
  assert correct() == [False, False, True, True]


def test_per_example_output(tmp_path, refs):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [
      {"question": "q1", "prediction": "Paris"},
      {"question": "q2", "prediction": "1875"},
  ])
  out = tmp_path / "sub" / "per_example.jsonl"
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds),
                   "--per-example", str(out)]) == 0
  rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  assert [r["question"] for r in rows] == ["q1", "q2", "q3", "q4"]
  assert rows[0] == {"question": "q1", "answer": ["Paris"], "prediction": "Paris",
                     "correct": True}
  assert rows[1]["correct"] is False
  assert rows[3]["prediction"] is None and rows[3]["correct"] is False
  assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]


def test_unicode_questions_and_answers_survive(tmp_path):
  refs = _write_jsonl(tmp_path / "refs.jsonl", [{"question": "où?", "answer": ["Café"]}])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [{"question": "où?", "prediction": "cafe\u0301"}])
  assert score_files(references=refs, predictions=preds)["num_correct"] == 1


GOOD_REF = '{"question": "q1", "answer": ["a"]}'
GOOD_PRED = '{"question": "q1", "prediction": "a"}'


@pytest.mark.parametrize("which, bad_line, field, reason", [
    ("references", "{not json", None, "not valid JSON"),
    ("references", '{"answer": ["a"]}', "question", "missing"),
    ("references", '{"question": "q2"}', "answer", "missing"),
    ("references", '{"question": "q2", "answer": "a"}', "answer", "list of answer strings"),
    ("references", '{"question": "q2", "answer": ["a", 3]}', "answer", "list of answer strings"),
    ("references", '{"question": "q2", "answer": []}', "answer", "empty answer list"),
    ("references", '{"question": 7, "answer": ["a"]}', "question", "expected a string"),
    ("predictions", "[1, 2]", None, "expected a JSON object"),
    ("predictions", '{"question": "q2"}', "prediction", "missing"),
    ("predictions", '{"prediction": "a"}', "question", "missing"),
    ("predictions", '{"question": "q2", "prediction": null}', "prediction", "expected a string"),
])
def test_bad_input_exits_2_naming_file_line_and_field(tmp_path, capsys, which, bad_line, field,
                                                      reason):
  refs = _write_jsonl(tmp_path / "refs.jsonl",
                      [GOOD_REF] + ([bad_line] if which == "references" else []))
  preds = _write_jsonl(tmp_path / "preds.jsonl",
                       [GOOD_PRED] + ([bad_line] if which == "predictions" else []))
  bad_path = refs if which == "references" else preds
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds)]) == 2
  err = capsys.readouterr().err
  assert f"{bad_path}:2:" in err
  assert reason in err
  if field is not None:
    assert f"field '{field}'" in err


@pytest.mark.parametrize("which", ["references", "predictions"])
def test_missing_file_exits_2(tmp_path, capsys, which):
  refs = _write_jsonl(tmp_path / "refs.jsonl", [GOOD_REF])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [GOOD_PRED])
  paths = {"references": refs, "predictions": preds}
  paths[which] = tmp_path / "absent.jsonl"
  assert cli.main(["score", "--references", str(paths["references"]),
                   "--predictions", str(paths["predictions"])]) == 2
  err = capsys.readouterr().err
  assert f"{tmp_path / 'absent.jsonl'}" in err and "does not exist" in err


def test_empty_references_and_non_utf8_are_input_errors(tmp_path):
  empty = _write_jsonl(tmp_path / "empty.jsonl", [])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [GOOD_PRED])
  with pytest.raises(InputError, match="no references"):
    score_files(references=empty, predictions=preds)
  latin1 = tmp_path / "latin1.jsonl"
  latin1.write_bytes(b'{"question": "q0", "answer": ["a"]}\n' +
                     '{"question": "q1", "answer": ["caf\u00e9"]}\n'.encode("latin-1"))
  with pytest.raises(InputError, match="not UTF-8") as e:
    score_files(references=latin1, predictions=preds)
  assert e.value.line == 2   # the line, not a byte offset into the file


def test_per_example_naming_a_folder_is_refused_before_any_work(tmp_path, refs, capsys):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [GOOD_PRED])
  (tmp_path / "out").mkdir()
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds),
                   "--per-example", str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err
  assert "--per-example names a folder" in err and "Traceback" not in err
  assert list((tmp_path / "out").iterdir()) == []


def test_gin_bindings_are_refused(tmp_path, refs, capsys):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [GOOD_PRED])
  assert cli.main(["score", "--references", str(refs), "--predictions", str(preds),
                   "--gin.foo=1"]) == 2
  assert "no gin bindings" in capsys.readouterr().err


def test_references_in_dpr_layouts_score_as_the_same_jsonl(tmp_path):
  preds = _write_jsonl(tmp_path / "preds.jsonl", [{"question": "q1", "prediction": "Paris"},
                                                  {"question": "q2", "prediction": "1875"}])
  jsonl = _write_jsonl(tmp_path / "nq-test.jsonl", [{"question": "q1", "answer": ["Paris"]},
                                                    {"question": "q2", "answer": ["1873"]}])
  csv = tmp_path / "nq-test.csv"   # DPR's qa file: tab-separated, a Python list
  csv.write_text("q1\t['Paris']\nq2\t['1873']\n", encoding="utf-8")
  biencoder = tmp_path / "biencoder-nq-dev.json"
  biencoder.write_text(json.dumps([{"question": q, "answers": a, "positive_ctxs": []}
                                   for q, a in (("q1", ["Paris"]), ("q2", ["1873"]))],
                                  indent=4), encoding="utf-8")
  summaries = [score_files(references=r, predictions=preds) for r in (jsonl, csv, biencoder)]
  assert {(s["num_correct"], s["num_total"]) for s in summaries} == {(1, 2)}
  biencoder.write_text('[\n{"question": "q1", "answers": ["Paris"]},\n{"question": "q2"}\n]')
  with pytest.raises(InputError, match="field 'answers': missing") as e:
    score_files(references=biencoder, predictions=preds)
  assert e.value.line == 3


def test_answer_field_scores_efficientqas_rated_answers(tmp_path, capsys):
  refs = _write_jsonl(tmp_path / "NQ-open.efficientqa.test.1.1.jsonl", [
      {"question": "q1", "def_correct_predictions": ["fifty-three"],
       "poss_correct_predictions": [], "answer": ["53"],
       "answer_and_def_correct_predictions": ["53", "fifty-three"]}])
  preds = _write_jsonl(tmp_path / "preds.jsonl", [{"question": "q1", "prediction": "fifty-three"}])
  args = ["score", "--references", str(refs), "--predictions", str(preds)]
  assert cli.main(args) == 0
  assert _json_summary(capsys.readouterr().out)["num_correct"] == 0
  assert cli.main(args + ["--answer-field", "answer_and_def_correct_predictions"]) == 0
  summary = _json_summary(capsys.readouterr().out)
  assert summary["num_correct"] == 1
  assert summary["answer_field"] == "answer_and_def_correct_predictions"
  assert cli.main(args + ["--answer-field", "answers"]) == 2
  assert f"{refs}:1: field 'answers': missing" in capsys.readouterr().err
