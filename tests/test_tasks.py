"""seqio tasks: registration, features, lengths, masking, metric binding, errors, the CLI."""
from __future__ import annotations

import importlib
import json

import gin
import numpy as np
import pytest
import seqio
import tensorflow as tf

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.gin_utils import parse_gin
from realm_bench.tasks import data
from realm_bench.tasks import registry
from realm_bench.tasks import vocab as vocab_lib

LONG = ("Ada Lovelace met Charles Babbage in London and wrote about the engine that "
        "Babbage designed while living in London for many years before 1850")
SENTENCES = [
    {"text": "Ada Lovelace was born in London in 1815.", "block_id": 0,
     "spans": [{"start": 0, "end": 12, "kind": "entity"},
               {"start": 25, "end": 31, "kind": "entity"},
               {"start": 35, "end": 39, "kind": "date"}]},
    {"text": "Zoë Café was founded in Paris in 1901.", "block_id": 1,
     "spans": [{"start": 0, "end": 8, "kind": "entity"}]},
    {"text": "Nothing is annotated in this sentence.", "block_id": -1, "spans": []},
    # Its only span lies beyond QUERY_LEN, so salient masking must drop it.
    {"text": LONG, "block_id": 2, "spans": [{"start": len(LONG) - 4, "end": len(LONG),
                                             "kind": "date"}]},
]
BLOCKS = [
    {"id": 7, "title": "Ada Lovelace", "body": "Ada Lovelace was born in London in 1815. " * 6},
    {"id": 3, "title": "Zoë Café", "body": "Zoë Café was founded in Paris in 1901 by Éric Straße."},
]
QUESTIONS = {
    "train": [{"question": "where was ada lovelace born?", "answer": ["London"]}],
    "dev": [{"question": "who founded Zoë Café?", "answer": ["Éric Straße", "Eric"]}],
    "test": [{"question": "when was ada lovelace born in london " * 8, "answer": ["1815"]}],
}
QUERY_LEN, BLOCK_LEN = 12, 20


def _jsonl(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                  encoding="utf-8")


def _write_world(root):
  _jsonl(root / "corpus" / "blocks.jsonl", BLOCKS)
  _jsonl(root / "pretrain" / "sentences.jsonl", SENTENCES)
  for folder in data.OPEN_QA_FOLDERS:
    for split, rows in QUESTIONS.items():
      _jsonl(root / "open_qa" / folder / f"{split}.jsonl", rows)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  root = tmp_path_factory.mktemp("world")
  _write_world(root)
  texts = [b["title"] for b in BLOCKS] + [b["body"] for b in BLOCKS]
  texts += [s["text"] for s in SENTENCES] + [q["question"] for r in QUESTIONS.values() for q in r]
  vocab_lib.learn_vocabulary(texts=texts * 3, size=150, out=root / "vocab.txt")
  return root


def _configure(world, **macros):
  values = {"WORLD_DIR": repr(str(world)), "VOCAB_PATH": repr(str(world / "vocab.txt")),
            "QUERY_LEN": QUERY_LEN, "BLOCK_LEN": BLOCK_LEN}
  values.update(macros)
  parse_gin(["tasks.gin"], [f"{k} = {v}" for k, v in values.items()], finalize=False)


@pytest.fixture(autouse=True)
def _clean_gin():
  gin.clear_config()
  yield
  gin.clear_config()


@pytest.fixture()
def configured(world):
  _configure(world)
  return world


def _examples(name, split="train", **kwargs):
  """The task read as the pipelines read it: sequence lengths from the gin-bound macros."""
  lengths = gin.get_configurable(data.SequenceLengths)()
  kwargs.setdefault("sequence_length", lengths.for_blocks() if name.endswith(".corpus")
                    else lengths.for_queries())
  ds = seqio.get_mixture_or_task(name).get_dataset(split=split, shuffle=False, **kwargs)
  return list(ds.as_numpy_iterator())


def _vocab():
  return vocab_lib.get_vocabulary()


EXPECTED_TASKS = {
    "realm_bench.nq_open", "realm_bench.web_questions", "realm_bench.curated_trec",
    "realm_bench.synthetic.nq_open", "realm_bench.synthetic.web_questions",
    "realm_bench.synthetic.curated_trec", "realm_bench.pretrain", "realm_bench.synthetic.pretrain",
    "realm_bench.corpus", "realm_bench.synthetic.corpus",
    "realm_bench.pretrain_blocks", "realm_bench.synthetic.pretrain_blocks",
}


def test_every_task_registers_and_importing_twice_is_fine():
  importlib.reload(registry)
  importlib.import_module("realm_bench.tasks.registry")
  assert set(registry.task_names()) == EXPECTED_TASKS
  for name in EXPECTED_TASKS:
    task = seqio.get_mixture_or_task(name)
    assert task.output_features["inputs"].add_eos is False


@pytest.mark.parametrize("name", ["realm_bench.synthetic.nq_open",
                                  "realm_bench.synthetic.web_questions",
                                  "realm_bench.synthetic.curated_trec"])
def test_open_qa_features(configured, name):
  v = _vocab()
  (dev,) = _examples(name, "validation")
  assert set(dev) == {"inputs", "question", "answers", "targets", "targets_pretokenized"}
  assert dev["question"].decode() == "who founded Zoë Café?"  # validation reads dev.jsonl
  assert [a.decode() for a in dev["answers"]] == ["Éric Straße", "Eric"]
  # seqio's targets: the first gold, as text and as wordpieces without [CLS]/[SEP].
  assert dev["targets_pretokenized"].decode() == "Éric Straße"
  assert dev["targets"].dtype == np.int32 and dev["targets"].tolist() == v.encode("Éric Straße")
  assert dev["inputs"].dtype == np.int32 and dev["inputs"].ndim == 1
  assert dev["inputs"].tolist() == [v.cls_id, *v.encode("who founded Zoë Café?"), v.sep_id]
  if name != "realm_bench.synthetic.nq_open":
    return  # one task is enough for truncation and the train split
  (test,) = _examples(name, "test")
  assert len(test["inputs"]) == QUERY_LEN  # truncated, not padded
  assert test["inputs"][0] == v.cls_id and test["inputs"][-1] == v.sep_id
  assert test["inputs"][1:-1].tolist() == v.encode(QUESTIONS["test"][0]["question"])[:QUERY_LEN - 2]
  assert len(_examples(name, "train")) == 1


def test_metrics_are_bound_at_registration():
  qualified = {name: [f.qualified_name for f in seqio.get_mixture_or_task(name).metric_fns]
               for name in EXPECTED_TASKS if "pretrain" not in name and "corpus" not in name}
  for name, fns in qualified.items():
    expected = "regex_match_metric" if name.endswith("curated_trec") else "exact_match_metric"
    assert fns == [f"realm_bench.tasks.metrics.{expected}"], name
  trec = seqio.get_mixture_or_task("realm_bench.synthetic.curated_trec")
  nq = seqio.get_mixture_or_task("realm_bench.nq_open")
  assert trec.predict_metric_fns  # seqio sees the (targets, predictions) signature
  targets, predictions = [["Lond.*"]], ["london"]
  assert trec.metric_fns[0](targets, predictions) == {"exact_match": 100.0}
  assert nq.metric_fns[0](targets, predictions) == {"exact_match": 0.0}
  example = {"answers": np.array([b"Paris", b"Lutetia"], dtype=object)}
  assert trec.postprocess_fn(b"ignored", example=example, is_target=True) == ["Paris", "Lutetia"]
  assert trec.postprocess_fn(b"Paris", example=example, is_target=False) == "Paris"


def test_open_qa_reads_dpr_tsv(tmp_path, world):
  folder = tmp_path / "open_qa" / "nq"
  folder.mkdir(parents=True)
  (folder / "dev.tsv").write_text(
      "who wrote hamlet?\t['William Shakespeare', \"Shakespeare's\"]\n"
      'capital of france?\t["Paris"]\n', encoding="utf-8")
  _configure(world, DATA_DIR=repr(str(tmp_path)))
  rows = _examples("realm_bench.nq_open", "validation")
  assert [r["question"].decode() for r in rows] == ["who wrote hamlet?", "capital of france?"]
  assert [a.decode() for a in rows[0]["answers"]] == ["William Shakespeare", "Shakespeare's"]


def test_corpus_features_and_truncation(configured):
  v = _vocab()
  rows = _examples("realm_bench.synthetic.corpus")
  assert [r["id"] for r in rows] == [7, 3]  # file order
  for row, block in zip(rows, BLOCKS):
    title, body = row["title"].decode(), row["body"].decode()
    assert (title, body) == (block["title"], block["body"])
    for key in ("inputs", "title_ids", "body_ids", "body_starts", "body_ends"):
      assert row[key].dtype == np.int32 and row[key].ndim == 1
    assert row["id"].dtype == np.int32
    assert row["title_ids"].tolist() == v.encode(title)  # the title is kept whole
    assert row["inputs"].tolist() == [v.cls_id, *row["title_ids"], v.sep_id, *row["body_ids"],
                                      v.sep_id]
    assert len(row["inputs"]) <= BLOCK_LEN
    assert len(row["body_ids"]) == min(len(v.encode(body)), BLOCK_LEN - len(row["title_ids"]) - 3)
    ids, starts, ends = v.encode_with_offsets(body)
    n = len(row["body_ids"])
    assert row["body_ids"].tolist() == ids[:n].tolist()
    assert row["body_starts"].tolist() == starts[:n].tolist()
    assert row["body_ends"].tolist() == ends[:n].tolist()
  assert len(rows[0]["inputs"]) == BLOCK_LEN  # the long body was cut
  cafe = rows[1]
  spans = [cafe["body"].decode()[s:e] for s, e in zip(cafe["body_starts"], cafe["body_ends"])]
  assert "Zoë" in spans and "Café" in spans
  with pytest.raises(ValueError, match="Shuffling is disallowed"):
    seqio.get_mixture_or_task("realm_bench.synthetic.corpus").get_dataset(
        split="train", sequence_length={"inputs": BLOCK_LEN})


@pytest.mark.parametrize("name", ["realm_bench.synthetic.corpus", "realm_bench.synthetic.nq_open",
                                  "realm_bench.synthetic.pretrain"])
def test_tasks_need_their_sequence_length(configured, name):
  with pytest.raises(InputError, match="sequence_length"):
    _examples(name, "validation" if "nq" in name else "train", sequence_length=None)


def test_corpus_reads_dpr_passages_tsv(tmp_path, world):
  (tmp_path / "corpus").mkdir()
  (tmp_path / "corpus" / "passages.tsv").write_text(
      'id\ttext\ttitle\n1\t"Paris is the capital of France, ""they"" say."\tParis\n'
      "2\tLondon is big.\tLondon\n", encoding="utf-8")
  _configure(world, DATA_DIR=repr(str(tmp_path)))
  rows = _examples("realm_bench.corpus")
  assert [(r["id"], r["title"].decode()) for r in rows] == [(1, "Paris"), (2, "London")]
  assert rows[0]["body"].decode() == 'Paris is the capital of France, "they" say.'


def _covered(v, text, start, end):
  _, starts, ends = v.encode_with_offsets(text)
  return {i for i, (s, e) in enumerate(zip(starts, ends)) if s < end and e > start}


def test_salient_span_masks_exactly_one_annotated_span(configured):
  v = _vocab()
  rows = _examples("realm_bench.synthetic.pretrain")
  # The unannotated sentence and the one whose span was truncated away are dropped.
  assert [r["block_id"] for r in rows] == [0, 1]
  for row, sentence in zip(rows, SENTENCES[:2]):
    inputs, targets = row["inputs"], row["targets"]
    assert inputs.dtype == np.int32 and targets.dtype == np.int32 and row["block_id"].ndim == 0
    assert len(inputs) == len(targets) <= QUERY_LEN
    assert inputs[0] == v.cls_id and inputs[-1] == v.sep_id
    original = [v.cls_id, *v.encode(sentence["text"])[:QUERY_LEN - 2], v.sep_id]
    masked = {i - 1 for i in np.flatnonzero(inputs == v.mask_id)}
    candidates = [_covered(v, sentence["text"], s["start"], s["end"]) for s in sentence["spans"]]
    assert masked in candidates
    for i, (got, want, target) in enumerate(zip(inputs, original, targets)):
      if i - 1 in masked:
        assert target == want and target != 0
      else:
        assert got == want and target == 0


def _first_masks(seed, **kwargs):
  gin.bind_parameter("mask_tokens.seed", seed)
  return [tuple(r["inputs"]) for r in _examples("realm_bench.synthetic.pretrain", **kwargs)]


def test_salient_choice_is_seeded_and_new_each_epoch(configured):
  first = _first_masks(5)
  epochs = _first_masks(5, num_epochs=4)
  assert epochs[:2] == first and len(epochs) == 8  # the same seed gives the same masks
  assert len(set(epochs[0::2])) > 1  # later epochs draw new ones
  # The first sentence has three spans to choose from.
  assert len({first[0], _first_masks(0)[0], _first_masks(1)[0]}) > 1


@pytest.mark.parametrize("strategy", ["random_token", "random_span"])
def test_random_masking_rate_and_determinism(world, strategy):
  _configure(world, MASKING=repr(strategy), QUERY_LEN=64)
  v = _vocab()
  rows = _examples("realm_bench.synthetic.pretrain")
  assert len(rows) == len(SENTENCES)  # random strategies do not need spans
  for row, sentence in zip(rows, SENTENCES):
    n = len(row["inputs"]) - 2
    masked = row["inputs"][1:-1] == v.mask_id
    assert masked.sum() == max(1, round(0.15 * n))
    original = np.array(v.encode(sentence["text"])[:n])
    assert (row["targets"][1:-1][masked] == original[masked]).all()
    assert (row["targets"][1:-1][~masked] == 0).all()
  long = rows[3]["inputs"][1:-1] == v.mask_id
  if strategy == "random_span":  # a few runs, not scattered single tokens
    runs = np.count_nonzero(np.diff(np.concatenate([[0], long.astype(int)])) == 1)
    assert runs < long.sum()
  again = _examples("realm_bench.synthetic.pretrain")
  gin.bind_parameter("mask_tokens.seed", 4)
  other = _examples("realm_bench.synthetic.pretrain")
  assert all((a["inputs"] == b["inputs"]).all() for a, b in zip(rows, again))
  assert any((a["inputs"] != b["inputs"]).any() for a, b in zip(rows, other))


def test_unknown_masking_strategy(world):
  _configure(world, MASKING="'whole_word'")
  with pytest.raises(InputError, match="salient_span, random_token, random_span"):
    _examples("realm_bench.synthetic.pretrain")


def test_missing_world_and_files(tmp_path, world):
  with pytest.raises(InputError, match="WORLD_DIR is not set.*realm-bench world"):
    _examples("realm_bench.synthetic.nq_open")
  _configure(world, WORLD_DIR=repr(str(tmp_path / "absent")))
  with pytest.raises(InputError, match="absent"):
    _examples("realm_bench.synthetic.corpus")
  _configure(world, WORLD_DIR=repr(str(tmp_path)))
  with pytest.raises(InputError, match="realm-bench world") as e:
    _examples("realm_bench.synthetic.pretrain")
  assert e.value.path == str(tmp_path / "pretrain" / "sentences.jsonl")
  _configure(world, DATA_DIR=repr(str(tmp_path)))
  with pytest.raises(InputError, match="79,168") as e:
    _examples("realm_bench.nq_open", "test")
  assert e.value.path == str(tmp_path / "open_qa" / "nq" / "test.jsonl")


def test_bad_lines_name_file_line_and_field(tmp_path, world):
  _write_world(tmp_path)
  qa = tmp_path / "open_qa" / "wq" / "train.jsonl"
  qa.write_text('{"question": "a?", "answer": ["b"]}\n{"question": "c?", "answer": ["d"\n',
                encoding="utf-8")
  _configure(world, WORLD_DIR=repr(str(tmp_path)))
  with pytest.raises(InputError, match="not valid JSON") as e:
    _examples("realm_bench.synthetic.web_questions")
  assert (e.value.path, e.value.line) == (str(qa), 2)
  qa.write_text('{"question": "a?", "answer": "b"}\n', encoding="utf-8")
  with pytest.raises(InputError) as e:
    _examples("realm_bench.synthetic.web_questions")
  assert (e.value.line, e.value.field) == (1, "answer")
  # Streamed files fail while iterating; the message still names file, line and field.
  bad = dict(SENTENCES[0], spans=[{"start": 5, "end": 99, "kind": "entity"}])
  _jsonl(tmp_path / "pretrain" / "sentences.jsonl", [SENTENCES[1], bad])
  with pytest.raises(tf.errors.OpError) as e:
    _examples("realm_bench.synthetic.pretrain")
  error = data.input_error_from(e.value)
  assert error is not None
  assert "sentences.jsonl:2: field 'spans[0]'" in str(error)


def test_tasks_command_lists_and_shows(world, capsys):
  assert cli.main(["tasks"]) == 0
  listing = capsys.readouterr().out
  for name in EXPECTED_TASKS:
    assert name in listing
  assert "WORLD_DIR/open_qa/trec" in listing and "regex_match_metric" in listing
  args = ["tasks", "realm_bench.synthetic.curated_trec", "--num", "1",
          f"--gin.WORLD_DIR='{world}'", f"--gin.VOCAB_PATH='{world / 'vocab.txt'}'"]
  assert cli.main(args) == 0
  shown = capsys.readouterr().out
  assert "[CLS] who founded zoe cafe ? [SEP]" in shown and "Éric Straße" in shown
  assert cli.main(["tasks", "realm_bench.synthetic.pretrain", "--split", "train",
                   f"--gin.WORLD_DIR='{world}'", f"--gin.VOCAB_PATH='{world / 'vocab.txt'}'"]) == 0
  assert "[MASK]" in capsys.readouterr().out
  assert cli.main(["tasks", "realm_bench.synthetic.nq_open"]) == 2
  assert "WORLD_DIR is not set" in capsys.readouterr().err
  assert cli.main(["tasks", "realm_bench.nope"]) == 2


def test_a_tsv_question_starting_with_a_quote_does_not_swallow_the_next_lines(tmp_path, world):
  folder = tmp_path / "open_qa" / "trec"
  folder.mkdir(parents=True)
  lines = ['"Big Bill" Haywood led which union?\t["IWW"]', "who wrote hamlet?\t['Shakespeare']",
           'what is "pi"?\t["3.14"]', "capital of france?\t['Paris']"]
  (folder / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
  rows = data.read_open_qa(tmp_path, "trec", "test", kind="data")
  assert [q for q, _ in rows] == [line.split("\t")[0] for line in lines]   # every line, as is
  assert rows[0][1] == ["IWW"]
  (folder / "test.tsv").write_text("a?\tb\tc\n", encoding="utf-8")
  with pytest.raises(InputError, match="expected 2 tab-separated columns, got 3"):
    data.read_open_qa(tmp_path, "trec", "test", kind="data")


def test_a_real_split_of_an_unexpected_size_is_reported(tmp_path, capsys):
  folder = tmp_path / "open_qa" / "trec"
  folder.mkdir(parents=True)
  (folder / "test.tsv").write_text("a?\t['b']\n", encoding="utf-8")
  data.read_open_qa(tmp_path, "trec", "test", kind="data")
  assert "1 questions, the released split has 694" in capsys.readouterr().err


def test_an_unbalanced_quote_in_the_passages_tsv_is_named(tmp_path):
  path = tmp_path / "passages.tsv"
  path.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet\tAaron\n2\tMoses led\tMoses\n'
                  '3\tMiriam sang\tMiriam\n', encoding="utf-8")
  with pytest.raises(InputError, match="runs on over lines 2-") as e:
    list(data.iter_passages_tsv(path))
  assert e.value.line == 2


@pytest.mark.parametrize("relpath", ["open_qa/nq/dev.jsonl", "open_qa/nq/dev.tsv",
                                     "corpus/blocks.jsonl", "corpus/passages.tsv"])
def test_bytes_that_are_not_utf8_name_their_line_in_every_loader(tmp_path, relpath):
  path = tmp_path / relpath
  path.parent.mkdir(parents=True)
  good = {"open_qa/nq/dev.jsonl": b'{"question": "q?", "answer": ["a"]}',
          "open_qa/nq/dev.tsv": b"q?\t['a']",
          "corpus/blocks.jsonl": b'{"id": 1, "title": "t", "body": "b"}',
          "corpus/passages.tsv": b"id\ttext\ttitle\n1\tb\tt"}[relpath]
  path.write_bytes(good + b"\n" + good.splitlines()[-1].replace(b"q?", b"caf\xe9?").replace(
      b'"b"', b'"caf\xe9"').replace(b"\tb\t", b"\tcaf\xe9\t") + b"\n")
  read = (lambda: data.read_open_qa(tmp_path, "nq", "dev", kind="data")) if "open_qa" in \
      relpath else (lambda: list(data.iter_blocks(tmp_path, kind="data")))
  with pytest.raises(InputError, match="not UTF-8 text") as e:
    read()
  assert (e.value.path, e.value.line) == (str(path), len(good.splitlines()) + 1)


def test_streamed_non_utf8_text_surfaces_as_a_clean_error(tmp_path, world):
  _write_world(tmp_path)
  blocks = tmp_path / "corpus" / "blocks.jsonl"
  blocks.write_bytes(blocks.read_bytes() + b'{"id": 9, "title": "x", "body": "caf\xe9"}\n')
  _configure(world, WORLD_DIR=repr(str(tmp_path)))
  with pytest.raises(tf.errors.OpError) as e:
    _examples("realm_bench.synthetic.corpus", "train")
  error = data.input_error_from(e.value)
  assert error is not None and "blocks.jsonl:3: not UTF-8 text" in str(error)
