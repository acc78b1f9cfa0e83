"""`data convert` and `data check`: real-data files in the layouts users download become the
tasks' files, and a DATA_DIR is checked the way the tasks read it, every problem named."""
from __future__ import annotations

import json

from realm_bench import cli, data_splits
from realm_bench.tasks import data

DPR_CSV = ("\"Big Bill\" Haywood led which union?\t['IWW']\n"
           "who wrote hamlet?\t['Shakespeare', \"O'Neill\"]\n")
DRQA_TXT = ('{"question": "what is the capital of france?", "answer": ["Paris"]}\n'
            '{"question": "who wrote hamlet?", "answer": ["Shakespeare", "William Shakespeare"]}\n')


def _biencoder(items) -> str:
  """DPR's biencoder layout, written as DPR writes it (json.dump with indent=4)."""
  return json.dumps([{"dataset": "nq_dev_psgs_w100", "question": q, "answers": a,
                      "positive_ctxs": [{"title": "T", "text": "x", "score": 1000,
                                         "title_score": 1, "passage_id": "1"}],
                      "negative_ctxs": [], "hard_negative_ctxs": []} for q, a in items],
                    indent=4)


def _jsonl(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                  encoding="utf-8")
  return path


def test_convert_writes_the_tasks_json_lines_from_each_format(tmp_path, capsys):
  sources = {"nq-test.csv": DPR_CSV, "biencoder-nq-dev.json":
             _biencoder([('"Big Bill" Haywood led which union?', ["IWW"]),
                         ("who wrote hamlet?", ["Shakespeare", "O'Neill"])])}
  written = []
  for name, text in sources.items():
    (tmp_path / name).write_text(text, encoding="utf-8")
    out = tmp_path / "data" / name / "open_qa" / "trec" / "test.jsonl"
    assert cli.main(["data", "convert", "--from", str(tmp_path / name), "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["rows"] == printed["questions"] == 2
    written.append(out.read_text(encoding="utf-8"))
    # What was written is what the task reads.
    assert data.read_open_qa(out.parents[2], "trec", "test", kind="data") == [
        ('"Big Bill" Haywood led which union?', ["IWW"]),
        ("who wrote hamlet?", ["Shakespeare", "O'Neill"])]
  assert written[0] == written[1]
  capsys.readouterr()


def test_convert_names_the_bad_row_and_writes_nothing(tmp_path, capsys):
  source = tmp_path / "WebQuestions-test.txt"
  source.write_text(DRQA_TXT + '{"question": "q", "answer": "not a list"}\n', encoding="utf-8")
  out = tmp_path / "test.jsonl"
  assert cli.main(["data", "convert", "--from", str(source), "--out", str(out)]) == 2
  err = capsys.readouterr().err
  assert f"{source}:3: field 'answer'" in err and "Traceback" not in err
  assert not out.exists()
  assert cli.main(["data", "convert", "--from", str(source), "--out", str(tmp_path)]) == 2
  assert "names a folder" in capsys.readouterr().err
  assert cli.main(["data", "convert", "--from", str(source), "--out", str(source)]) == 2
  assert "is the file being converted" in capsys.readouterr().err


def _questions(n: int, stem: str) -> list[str]:
  return [f"{stem} number {i} of the series" for i in range(n)]


def _split_folder(root, folder: str) -> dict[str, list[str]]:
  """An ORQA-style train/dev split by the question hash, and a test split."""
  questions = _questions(80, f"which {folder} question is")
  buckets = data_splits.dev_buckets(questions)
  splits = {"train": [q for q, b in zip(questions, buckets) if b],
            "dev": [q for q, b in zip(questions, buckets) if not b],
            "test": _questions(5, f"a {folder} test question")}
  for split, qs in splits.items():
    _jsonl(root / "open_qa" / folder / f"{split}.jsonl",
           [{"question": q, "answer": ["a"]} for q in qs])
  return splits


def test_check_passes_a_folder_laid_out_as_the_tasks_read_it(tmp_path, capsys, monkeypatch):
  splits = _split_folder(tmp_path, "wq")
  for split, qs in splits.items():   # the paper's sizes, scaled down to this folder
    monkeypatch.setitem(data.EXPECTED_ROWS, ("wq", split), len(qs))
  _jsonl(tmp_path / "corpus" / "blocks.jsonl",
         [{"id": i, "title": "T", "body": "b"} for i in range(3)])
  _jsonl(tmp_path / "pretrain" / "sentences.jsonl",
         [{"text": "born in 1873", "spans": [{"start": 8, "end": 12, "kind": "date"}]},
          {"text": "no span", "spans": []}])
  monkeypatch.setattr("realm_bench.data_check.EXPECTED_BLOCKS", 3)
  assert cli.main(["data", "check", str(tmp_path)]) == 0
  out = capsys.readouterr().out
  assert f"open_qa/wq/dev.jsonl: WebQuestions dev; jsonl; {len(splits['dev'])} rows" in out
  assert "corpus/blocks.jsonl: corpus; blocks-jsonl; 3 rows (paper: 3), 3 distinct ids; ok" in out
  assert "1 sentences have a salient span" in out
  assert "NQ-Open: no open_qa/nq" in out and out.rstrip().endswith("0 problem(s) in 5 file(s)")


def test_check_names_every_problem_and_the_split_that_is_not_orqas(tmp_path, capsys):
  splits = _split_folder(tmp_path, "nq")
  # DPR's nq-dev is not ORQA's dev: here, train questions outside the dev bucket.
  _jsonl(tmp_path / "open_qa" / "nq" / "dev.jsonl",
         [{"question": q, "answer": ["a"]} for q in splits["train"][:4]])
  trec = tmp_path / "open_qa" / "trec"
  _jsonl(trec / "test.jsonl", [{"question": "q1", "answer": ["18[0-9]{2}"]},
                               {"question": "q1", "answer": ["19[0-9]{2}"]},
                               {"question": "q2", "answer": ["ok", "(broken"]},
                               '{"question": "q3"}', '{"question": "", "answer": ["a"]}'])
  (trec / "test.tsv").write_text("q9\t['a']\n", encoding="utf-8")
  _jsonl(tmp_path / "corpus" / "blocks.jsonl",
         [{"id": 1, "title": "T", "body": "b"}, {"id": 1, "title": "T", "body": "c"},
          {"id": "2", "title": "T", "body": "d"}])
  (tmp_path / "downloads").mkdir()
  (tmp_path / "downloads" / "biencoder-nq-dev.json").write_text(_biencoder([("q", ["a"])]))
  assert cli.main(["data", "check", str(tmp_path), "--json"]) == 1
  report = json.loads(capsys.readouterr().out)
  files = {f["path"]: f for f in report["files"]}
  dev = files["open_qa/nq/dev.jsonl"]
  assert any("only 0 of 4 questions are in ORQA's dev hash bucket" in p for p in dev["problems"])
  assert not any("hash" in p for p in files["open_qa/nq/train.jsonl"]["problems"])
  test = files["open_qa/trec/test.jsonl"]
  assert (test["rows"], test["distinct"], test["expected_distinct"]) == (3, 2, 693)
  problems = "\n".join(test["problems"])
  for where in (f"{trec / 'test.jsonl'}:4: field 'answer': missing",
                f"{trec / 'test.jsonl'}:5: field 'question'",
                f"{trec / 'test.jsonl'}:3: field 'answer[1]': the regular expression"):
    assert where in problems
  assert "3 rows; the paper's split has 694" in problems
  assert files["open_qa/trec/test.tsv"]["role"] == "not read by any task"
  assert "the tasks read test.jsonl instead" in files["open_qa/trec/test.tsv"]["notes"]
  assert files["open_qa/trec/train.jsonl"]["problems"] == [
      "missing (nor .tsv): the benchmark's other splits are here"]
  corpus = files["corpus/blocks.jsonl"]
  assert (corpus["rows"], corpus["distinct"]) == (2, 1)
  assert any(":3: field 'id'" in p for p in corpus["problems"])
  assert any("1 block ids repeat" in p for p in corpus["problems"])
  unread = files["downloads/biencoder-nq-dev.json"]
  assert (unread["format"], unread["rows"], unread["num_problems"]) == ("dpr-biencoder", 1, 0)
  assert report["problems"] == sum(f["num_problems"] for f in report["files"]) > 8


def test_check_of_a_missing_folder_exits_2(tmp_path, capsys):
  assert cli.main(["data", "check", str(tmp_path / "absent")]) == 2
  assert "no such folder" in capsys.readouterr().err
