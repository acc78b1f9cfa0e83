"""The tasks as another seqio program uses them: `realm_bench.tasks.configure(...)` instead of
gin, `seqio.get_mixture_or_task(name).get_dataset(...)` for every task and mixture, and
`seqio.Evaluator` with its default target handling scoring an oracle."""
from __future__ import annotations

import json

import gin
import numpy as np
import pytest
import seqio

import realm_bench.tasks
from realm_bench.errors import InputError
from realm_bench.tasks import data
from realm_bench.tasks import metrics
from realm_bench.tasks import registry
from realm_bench.tasks import vocab as vocab_lib

from test_tasks import BLOCKS, SENTENCES  # the tiny world's blocks and sentences

# Golds that survive the uncased wordpiece round trip, so decoded oracle ids score 100 EM;
# the second gold of each question checks that targets keep only the first.
QUESTIONS = {
    "train": [{"question": "where was ada lovelace born?", "answer": ["London", "England"]}],
    "dev": [{"question": "who founded the cafe?", "answer": ["Eric", "Eric Strasse"]},
            {"question": "where is the cafe?", "answer": ["Paris"]}],
    "test": [{"question": "when was ada lovelace born?", "answer": ["1815", "in 1815"]}],
}
LENGTHS = data.SequenceLengths(query=16, block=24)


def _jsonl(path, rows):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                  encoding="utf-8")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  root = tmp_path_factory.mktemp("seqio_world")
  _jsonl(root / "corpus" / "blocks.jsonl", BLOCKS)
  _jsonl(root / "pretrain" / "sentences.jsonl", SENTENCES)
  for folder in data.OPEN_QA_FOLDERS:
    for split, rows in QUESTIONS.items():
      _jsonl(root / "open_qa" / folder / f"{split}.jsonl", rows)
  texts = [b["title"] for b in BLOCKS] + [b["body"] for b in BLOCKS]
  texts += [s["text"] for s in SENTENCES]
  texts += [q["question"] + " " + " ".join(q["answer"]) for r in QUESTIONS.values() for q in r]
  vocab_lib.learn_vocabulary(texts=texts * 3, size=150, out=root / "vocab.txt")
  return root


@pytest.fixture(autouse=True)
def _no_gin_and_unconfigured():
  gin.clear_config()
  realm_bench.tasks.configure()
  yield
  realm_bench.tasks.configure()
  gin.clear_config()


@pytest.fixture()
def configured(world):
  # The real-data tasks read the same layout, so one tiny folder serves both kinds.
  return realm_bench.tasks.configure(world_dir=world, data_dir=world,
                                     vocab_path=world / "vocab.txt")


def _lengths(name):
  return LENGTHS.for_blocks() if name.endswith(".corpus") else LENGTHS.for_queries()


def test_unconfigured_tasks_and_bad_paths_name_configure(tmp_path, world):
  registry.register_all()
  with pytest.raises(InputError, match=r"realm_bench\.tasks\.configure\(world_dir=DIR\)"):
    seqio.get_mixture_or_task("realm_bench.synthetic.nq_open").get_dataset(
        sequence_length=LENGTHS.for_queries(), split="validation")
  with pytest.raises(InputError, match=r"configure\(data_dir=DIR\)"):
    seqio.get_mixture_or_task("realm_bench.nq_open").get_dataset(
        sequence_length=LENGTHS.for_queries(), split="validation")
  realm_bench.tasks.configure(world_dir=world)
  with pytest.raises(InputError, match=r"configure\(vocab_path=\.\.\.\)"):
    seqio.get_mixture_or_task("realm_bench.synthetic.nq_open").get_dataset(
        sequence_length=LENGTHS.for_queries(), split="validation")
  with pytest.raises(InputError, match=r"configure\(world_dir=\.\.\.\): folder does not exist") \
      as e:
    realm_bench.tasks.configure(world_dir=tmp_path / "absent")
  assert e.value.field == "world_dir" and e.value.path == str(tmp_path / "absent")
  (tmp_path / "bad_vocab.txt").write_text("hello\n", encoding="utf-8")
  with pytest.raises(InputError, match=r"configure\(vocab_path=\.\.\.\).*\[PAD\]") as e:
    realm_bench.tasks.configure(vocab_path=tmp_path / "bad_vocab.txt")
  assert (e.value.path, e.value.line) == (str(tmp_path / "bad_vocab.txt"), 1)


def test_a_gin_binding_wins_over_configure(tmp_path, configured, world):
  gin.bind_parameter("realm_bench.tasks.data.world_dir.path", str(tmp_path / "elsewhere"))
  with pytest.raises(InputError, match="elsewhere"):
    data.world_dir()
  gin.clear_config()
  assert data.world_dir() == world


def test_every_task_and_mixture_loads_through_seqio(configured):
  names = registry.task_names() + registry.mixture_names()
  assert {"realm_bench.pretrain_mix", "realm_bench.synthetic.pretrain_mix"} <= set(names)
  for name in names:
    provider = seqio.get_mixture_or_task(name)
    for split in provider.splits:
      ds = provider.get_dataset(sequence_length=_lengths(name), split=split, shuffle=False,
                                num_epochs=1)
      rows = list(ds.as_numpy_iterator())
      assert rows, (name, split)
      for key, feature in provider.output_features.items():
        assert all(r[key].dtype == feature.dtype.as_numpy_dtype for r in rows), (name, key)


def test_open_qa_targets_are_the_first_gold(configured):
  v = vocab_lib.get_vocabulary()
  rows = list(seqio.get_mixture_or_task("realm_bench.synthetic.web_questions").get_dataset(
      sequence_length=LENGTHS.for_queries(), split="validation", shuffle=False)
      .as_numpy_iterator())
  assert [r["targets_pretokenized"].decode() for r in rows] == ["Eric", "Paris"]
  assert [a.decode() for a in rows[0]["answers"]] == ["Eric", "Eric Strasse"]
  assert rows[1]["targets"].tolist() == v.encode("Paris")


def test_the_mixture_mixes_sentences_and_blocks(configured):
  mix = seqio.get_mixture_or_task("realm_bench.synthetic.pretrain_mix")
  assert set(mix.output_features) == {"inputs", "targets", "block_id"}
  ds = mix.get_dataset(sequence_length=LENGTHS.for_queries(), split="train", shuffle=False,
                       num_epochs=None, seed=0)
  block_ids = {int(r["block_id"]) for r in ds.take(40).as_numpy_iterator()}
  # Sentences keep their source block (0, 1); blocks are their own ids (7, 3).
  assert block_ids & {0, 1} and block_ids & {7, 3}
  blocks = list(seqio.get_mixture_or_task("realm_bench.synthetic.pretrain_blocks").get_dataset(
      sequence_length=LENGTHS.for_queries(), split="train", shuffle=False).as_numpy_iterator())
  v = vocab_lib.get_vocabulary()
  assert [int(r["block_id"]) for r in blocks] == [7, 3]
  assert all((r["inputs"] == v.mask_id).any() for r in blocks)


def _oracle(dataset, model_feature_shapes=None):
  """A model that answers every question with its first gold's wordpieces."""
  del model_feature_shapes
  return [(int(i), [t for t in ex["decoder_target_tokens"].tolist() if t != 0])
          for i, ex in dataset.as_numpy_iterator()]


@pytest.mark.parametrize("name", ["realm_bench.synthetic.nq_open",
                                  "realm_bench.synthetic.curated_trec", "realm_bench.nq_open"])
def test_seqio_evaluator_scores_an_oracle_at_100(configured, name):
  evaluator = seqio.Evaluator(
      mixture_or_task_name=name, feature_converter=seqio.EncDecFeatureConverter(pack=False),
      eval_split="validation", sequence_length=LENGTHS.for_queries())
  future, _ = evaluator.evaluate(compute_metrics=True, predict_fn=_oracle)
  assert future.result() == {name: {"exact_match": 100.0}}

  def wrong(dataset, model_feature_shapes=None):
    return [(i, []) for i, _ in _oracle(dataset, model_feature_shapes)]

  future, _ = evaluator.evaluate(compute_metrics=True, predict_fn=wrong)
  assert future.result() == {name: {"exact_match": 0.0}}


def test_recall_at_k_is_a_seqio_metric_function():
  recall = metrics.RecallAtK(2)
  targets = [["Paris"], ["1815"]]
  predictions = [["Lyon is big.", "Paris is the capital."], [b"born in 1815", "x"]]
  assert recall(targets, predictions) == {"recall@2": 100.0}
  assert metrics.RecallAtK(1)(targets, predictions) == {"recall@1": 50.0}
  assert metrics.RecallAtK(1, matcher="regex")([["Par.s"]], [["Paris"]]) == {"recall@1": 100.0}
  source = seqio.FunctionDataSource(lambda split, shuffle_files: None, splits=["validation"])
  task = seqio.Task("realm_bench_test.recall", source=source, output_features={},
                    metric_fns=[recall])
  assert task.predict_metric_fns == [recall]  # seqio reads the (targets, predictions) signature
  with pytest.raises(ValueError, match="positive integer"):
    metrics.RecallAtK(0)
  with pytest.raises(ValueError, match="matcher"):
    metrics.RecallAtK(5, matcher="fuzzy")
