"""`data resplit` makes ORQA's dev split: train questions whose TensorFlow hash bucket
(100,000 buckets) is 0 mod 10, released lines unchanged; bad lines are named."""
from __future__ import annotations

import json

from realm_bench import cli
from realm_bench.tf_runtime import tf


def _orqa_bucket(question: str) -> int:
  """One question at a time, as ORQA's script feeds its session."""
  return int(tf.strings.to_hash_bucket_fast(question, 100000).numpy()) % 10


def test_resplit_holds_out_orqas_dev_questions(tmp_path, capsys):
  questions = [f"who wrote book number {i} of the series" for i in range(300)]
  train = tmp_path / "WebQuestions-train.txt"
  train.write_text("".join(json.dumps({"question": q, "answer": [f"a{i}"]}) + "\n"
                           for i, q in enumerate(questions)))
  test = tmp_path / "webquestions-test.tsv"          # DPR's qa layout: question<TAB>answers
  test.write_text('what is "x"?\t["y", "z"]\nwhere is it?\t[\'here\']\n')   # DPR: python list
  out = tmp_path / "data" / "open_qa" / "wq"
  assert cli.main(["data", "resplit", "--name", "WebQuestions", "--train", str(train),
                   "--test", str(test), "--out", str(out)]) == 0
  printed = json.loads(capsys.readouterr().out)
  dev = [json.loads(line)["question"] for line in (out / "dev.jsonl").open()]
  kept = [json.loads(line)["question"] for line in (out / "train.jsonl").open()]
  assert dev == [q for q in questions if _orqa_bucket(q) == 0]
  assert kept == [q for q in questions if _orqa_bucket(q) != 0]
  assert 0 < len(dev) < 60 and printed["dev"] == len(dev) and printed["test"] == 2
  assert printed["differs_from_released"] == {"train": 3417, "dev": 361, "test": 2032}
  # JSON lines are copied as released; TSV rows become the JSON lines the tasks read.
  assert (out / "train.jsonl").read_text().splitlines()[0] in train.read_text()
  assert [json.loads(line) for line in (out / "test.jsonl").open()] == [
      {"question": 'what is "x"?', "answer": ["y", "z"]},
      {"question": "where is it?", "answer": ["here"]}]


def test_resplit_names_the_bad_line_and_writes_nothing(tmp_path, capsys):
  train = tmp_path / "train.jsonl"
  train.write_text('{"question": "q1", "answer": ["a"]}\n{"question": "", "answer": ["a"]}\n')
  out = tmp_path / "out"
  assert cli.main(["data", "resplit", "--name", "nq", "--train", str(train), "--test",
                   str(train), "--out", str(out)]) == 2
  err = capsys.readouterr().err
  assert str(train) in err and "2" in err and "question" in err and "Traceback" not in err
  assert not out.exists()
  assert cli.main(["data", "resplit", "--name", "squad", "--train", str(train), "--test",
                   str(train), "--out", str(out)]) == 2
  assert "--name" in capsys.readouterr().err
