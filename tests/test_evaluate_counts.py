"""`evaluate` counts questions as the official evaluation does: by question text, a repeated
question once with its last answer list (CuratedTREC's test file: 694 lines, 693 questions);
and CuratedTREC's Recall@k matcher follows from the task unless a matching one is asked for."""
from __future__ import annotations

import json

import pytest

from realm_bench import eval as eval_lib
from realm_bench.errors import InputError
from realm_bench.reporting.records import read_record
from realm_bench.tasks import metrics, registry
from realm_bench.tasks.data import SequenceLengths


def test_by_question_keeps_the_last_row_at_the_first_position():
  rows = [{"question": "a", "v": 1}, {"question": "b", "v": 2}, {"question": "a", "v": 3}]
  assert metrics.by_question(rows) == [{"question": "a", "v": 3}, {"question": "b", "v": 2}]


class _Lines:
  """A fine-tuned pipeline's output on a split that repeats a question (its answers differ)."""
  qa_task = "realm_bench.curated_trec"

  def examples(self, split):
    return [None] * 3

  def predictions(self, model, params, examples, *, batch_size):
    return [{"question": "q1", "answers": ["18[0-9]{2}"], "prediction": "1873"},
            {"question": "q2", "answers": ["paris"], "prediction": "Paris"},
            {"question": "q1", "answers": ["19[0-9]{2}"], "prediction": "1873"}]


def test_evaluate_scores_distinct_questions_as_the_official_script(tmp_path, monkeypatch):
  assert _Lines.qa_task in registry.task_names()
  monkeypatch.setattr(eval_lib, "load_finetuned", lambda **_: None)
  got = eval_lib.evaluate(model=None, pipeline=_Lines(), checkpoint_from=str(tmp_path / "ft"),
                          run_dir=str(tmp_path / "eval"), sequence_lengths=SequenceLengths(),
                          experiment="realm", dataset="ct", scale="paper")
  # Per line: 2 of 3. Officially q1 has the later patterns, which "1873" misses: 1 of 2.
  assert got == {"exact_match": 50.0}
  record = read_record(tmp_path / "eval" / "record.json")
  assert (record.num_examples, record.outcomes) == (2, "01")
  assert record.stats["repeated_question_lines"] == 1
  written = (tmp_path / "eval" / "predictions_test.jsonl").read_text().splitlines()
  assert [json.loads(line)["question"] for line in written] == ["q1", "q2", "q1"]


def test_the_recall_matcher_follows_from_the_task():
  assert eval_lib.recall_matcher("realm_bench.curated_trec", None) == "regex"
  assert eval_lib.recall_matcher("realm_bench.synthetic.curated_trec", None) == "regex"
  assert eval_lib.recall_matcher("realm_bench.nq_open", None) == "string"
  assert eval_lib.recall_matcher("realm_bench.nq_open", "dpr") == "dpr"
  # Patterns matched as literal text (or plain answers as patterns) would count nothing useful.
  with pytest.raises(InputError, match="regular expressions") as e:
    eval_lib.recall_matcher("realm_bench.curated_trec", "string")
  assert e.value.field == "matcher"
  with pytest.raises(InputError, match="not regular expressions"):
    eval_lib.recall_matcher("realm_bench.web_questions", "regex")


def test_the_shipped_gin_leaves_the_matcher_to_the_task():
  from realm_bench import resources  # pylint: disable=g-import-not-at-top
  text = (resources.shipped_folder("gin") / "runs" / "evaluate_retrieval.gin").read_text()
  assert "\nRECALL_MATCHER = None\n" in text
