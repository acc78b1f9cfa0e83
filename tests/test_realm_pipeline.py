"""REALM's stages end to end on the tiny world: train, resume, refresh, evaluate, infer, score.

One module-scoped world and vocabulary serve every test; a persistent compilation cache lets
the repeated tiny runs reuse their compiled steps.
"""
from __future__ import annotations

import json
from pathlib import Path

import gin
import numpy as np
import pytest

from realm_bench import cli, gin_utils
from realm_bench import eval as eval_lib
from realm_bench import train as train_lib
from realm_bench.errors import InputError
from realm_bench.reporting.records import read_record

OVERLAYS = ["sizes/tiny.gin", "testing/tiny.gin"]


def _bindings(root: Path, run: str, **macros) -> list[str]:
  out = [f"WORLD_DIR = '{root / 'world'}'", f"VOCAB_PATH = '{root / 'vocab.txt'}'",
         f"RUN_DIR = '{root / run}'"]
  return out + [f"{k} = {v!r}" for k, v in macros.items()]


def _train(root, run_file, run, stop_at_step=None, extra_files=(), **macros):
  gin_utils.parse_gin([run_file, *OVERLAYS, *extra_files], _bindings(root, run, **macros))
  return gin.get_configurable(train_lib.train)(progress=False, log_every=1,
                                               stop_at_step=stop_at_step)


def _metrics(run_dir: Path) -> list[dict]:
  return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def ict(world):
  _train(world, "runs/ict.gin", "ict", NUM_STEPS=3)
  return world / "ict"


@pytest.fixture(scope="module")
def realm(world, ict):
  """Six uninterrupted pre-training steps, the index refreshed every two."""
  summary = _train(world, "runs/pretrain.gin", "realm", NUM_STEPS=6, REFRESH_EVERY=2,
                   WARM_START=str(ict))
  return world / "realm", summary


def test_pretraining_refreshes_the_index_and_logs_staleness(world, realm):
  run_dir, record = realm
  rows = _metrics(run_dir)
  assert [r["staleness"] for r in rows] == [0, 1, 0, 1, 0, 1]
  assert [r["index_embedder_step"] for r in rows] == [0, 0, 2, 2, 4, 4]
  assert record.stats["num_refreshes"] == 3
  assert record.stats["staleness_mean"] == 0.5
  versions = sorted(p.name for p in (run_dir / "index").glob("v*"))
  assert versions[-1] == "v00000004"
  latest = (run_dir / "index" / "LATEST").read_text().strip()
  manifest = json.loads((run_dir / "index" / latest / "manifest.json").read_text())
  assert manifest["embedder_step"] == 4 and manifest["num_blocks"] > 0
  assert {"retrieval_utility", "null_doc_prob", "source_block_retrieved"} <= set(rows[-1])
  assert all(0.0 <= r["source_prior"] <= 1.0 and 0.0 <= r["source_posterior"] <= 1.0
             for r in rows)


def test_resumed_pretraining_equals_an_uninterrupted_run(world, ict, realm):
  # Stop after 3 steps (mid refresh interval), then rerun the same command.
  _train(world, "runs/pretrain.gin", "resumed", stop_at_step=3, NUM_STEPS=6, REFRESH_EVERY=2,
         WARM_START=str(ict))
  record = _train(world, "runs/pretrain.gin", "resumed", NUM_STEPS=6, REFRESH_EVERY=2,
                  WARM_START=str(ict))
  assert record.stats["resumed_from_step"] == 3
  assert _metrics(world / "resumed") == _metrics(realm[0])


def test_ict_with_sibling_negatives_trains_and_resumes_exactly(world):
  """The knob binds through runs/ict.gin; its batches are a function of (seed, step) alone."""
  def train(run, stop_at_step=None):
    gin_utils.parse_gin(["runs/ict.gin", *OVERLAYS], _bindings(world, run, NUM_STEPS=4) + [
        "ict.IctPipeline.siblings_per_block = 1"])
    return gin.get_configurable(train_lib.train)(progress=False, log_every=1,
                                                 stop_at_step=stop_at_step)
  whole = train("ict_siblings")
  assert "siblings_per_block = 1" in (world / "ict_siblings" / "config.gin").read_text()
  train("ict_siblings_resumed", stop_at_step=2)
  resumed = train("ict_siblings_resumed")
  assert resumed.stats["resumed_from_step"] == 2 and whole.steps == 4
  assert _metrics(world / "ict_siblings_resumed") == _metrics(world / "ict_siblings")


def _tensorboard_tags(run_dir) -> dict[str, int]:
  """{tag: step} of a run's TensorBoard events."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  events = event_accumulator.EventAccumulator(str(run_dir / "tb"), size_guidance={"tensors": 0})
  events.Reload()
  return {tag: events.Tensors(tag)[-1].step for tag in events.Tags()["tensors"]}


@pytest.fixture(scope="module")
def finetuned(world, ict):
  _train(world, "runs/finetune.gin", "ft", NUM_STEPS=3, WARM_START=str(ict), BERT_RUN=None,
         extra_files=["experiments/orqa.gin"])
  return world / "ft"


def test_finetune_evaluate_infer_and_score(world, finetuned, capsys):
  assert (world / "ft" / "index" / "frozen" / "manifest.json").exists()
  gin_utils.parse_gin(["runs/evaluate.gin", *OVERLAYS], _bindings(
      world, "eval", CHECKPOINT_FROM=str(world / "ft"), EXPERIMENT="realm", DATASET="nq"))
  metrics = gin.get_configurable(eval_lib.evaluate)()
  record = read_record(world / "eval" / "record.json")
  assert record.metrics == metrics and 0.0 <= metrics["exact_match"] <= 100.0
  assert record.scale == "synthetic" and record.split == "test" and record.steps == 3
  assert record.kind == "evaluate" and record.lineage == "ft"
  assert read_record(world / "ft").lineage == "ict" and read_record(world / "ict").lineage is None
  assert record.index_manifests and "ft" in (world / "eval" / "config.gin").read_text()
  # TensorBoard has the evaluation's metrics at the checkpoint's step, and both configs.
  assert _tensorboard_tags(world / "eval") == {"nq_test/exact_match": 3, "config": 3}
  assert _tensorboard_tags(world / "ft")["operative_config"] == 3
  # infer writes the ORQA format, and `score` agrees with the record.
  out = world / "pred.jsonl"
  args = ["--gin_file=runs/infer.gin", *[f"--gin_file={f}" for f in OVERLAYS],
          # infer has no run folder: a RUN_DIR binding would be refused as read by nothing.
          *[f"--gin.{b.replace(' = ', '=')}" for b in _bindings(world, "unused")
            if not b.startswith("RUN_DIR")],
          f"--gin.CHECKPOINT_FROM='{world / 'ft'}'", f"--gin.OUTPUT='{out}'"]
  assert cli.main(["infer", *args]) == 0
  refs = world / "world" / "open_qa" / "nq" / "test.jsonl"
  assert cli.main(["score", "--references", str(refs), "--predictions", str(out)]) == 0
  summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
  assert summary["exact_match"] == pytest.approx(metrics["exact_match"])
  assert summary["missing_predictions"] == 0


def test_recall_of_a_finetuned_run_counts_the_blocks_its_reader_reads(world, finetuned):
  """Its query tower searches the frozen index (not a corpus embedded with the document tower
  fine-tuning did not train), and finds what the evaluation's reader read."""
  gin_utils.parse_gin(["runs/evaluate.gin", *OVERLAYS], _bindings(
      world, "ft_eval_dev", CHECKPOINT_FROM=str(finetuned), EXPERIMENT="orqa", DATASET="nq",
      SPLIT="validation"))
  gin.get_configurable(eval_lib.evaluate)()
  evaluated = read_record(world / "ft_eval_dev" / "record.json")
  (k,) = [int(key.split("@")[1]) for key in evaluated.stats if key.startswith("finetuned_recall@")]
  gin_utils.parse_gin(["runs/evaluate_retrieval.gin", *OVERLAYS], _bindings(
      world, "ft_recall", CHECKPOINT_FROM=str(finetuned), EXPERIMENT="orqa", DATASET="nq",
      RECALL_K=k))
  metrics = gin.get_configurable(eval_lib.evaluate_retrieval)()
  record = read_record(world / "ft_recall" / "record.json")
  assert record.kind == "recall" and record.lineage == "ft"
  assert record.index_manifests[0]["embedder_step"] == "warm_start"
  assert metrics[f"recall@{k}"] == pytest.approx(evaluated.stats[f"finetuned_recall@{k}"])
  assert len(record.outcomes) == evaluated.num_examples


def test_recall_refuses_a_finetuned_run_without_a_dense_retriever(world):
  _train(world, "runs/finetune.gin", "ft_bm25", NUM_STEPS=1, WARM_START=None, BERT_RUN=None,
         extra_files=["experiments/bm25_reader.gin"])
  gin_utils.parse_gin(["runs/evaluate_retrieval.gin", *OVERLAYS], _bindings(
      world, "ft_bm25_recall", CHECKPOINT_FROM=str(world / "ft_bm25"), EXPERIMENT="bm25_reader",
      DATASET="nq"))
  with pytest.raises(InputError, match="no trained retriever") as e:
    gin.get_configurable(eval_lib.evaluate_retrieval)()
  assert e.value.field == "checkpoint_from"
  assert not (world / "ft_bm25_recall" / "record.json").exists()


def test_tables_join_the_refresh_interval_and_staleness_of_the_lineage(world, realm):
  from realm_bench.reporting import collect  # pylint: disable=g-import-not-at-top
  gin_utils.parse_gin(["runs/evaluate_retrieval.gin", *OVERLAYS], _bindings(
      world, "realm_recall", CHECKPOINT_FROM=str(realm[0]), EXPERIMENT="staleness",
      DATASET="nq"))
  gin.get_configurable(eval_lib.evaluate_retrieval)()
  record = read_record(world / "realm_recall" / "record.json")
  assert record.kind == "recall" and record.lineage == "realm" and record.steps == 6
  frame = collect.collect_records(world)
  row = frame[frame["run_id"] == "realm_recall"].iloc[0]
  assert row["params.refresh_every_steps"] == 2
  assert row["stats.staleness_mean"] == 0.5 and row["stats.num_refreshes"] == 3
  assert 0 < row["stats.refresh_seconds_mean"] <= row["stats.refresh_seconds_max"]


def test_zero_shot_recall_record(world, ict):
  gin_utils.parse_gin(["runs/evaluate_retrieval.gin", *OVERLAYS], _bindings(
      world, "recall", CHECKPOINT_FROM=str(ict), EXPERIMENT="orqa", DATASET="nq"))
  metrics = gin.get_configurable(eval_lib.evaluate_retrieval)()
  record = read_record(world / "recall" / "record.json")
  assert set(metrics) == {"recall@5"} and record.recall_matcher == "string"
  assert record.split == "dev"
  # The corpus was read from the run's memory-mapped token files, and their bodies are the
  # in-memory corpus's: recounting the retrieved blocks from the latter gives the same recall.
  from realm_bench.pipelines import base  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import metrics as qa_metrics  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  assert (world / "recall" / "corpus_tokens" / "manifest.json").exists()
  memory = base.load_corpus("realm_bench.synthetic.corpus",
                            gin.get_configurable(SequenceLengths)())
  retrieved = [json.loads(line)["retrieved"]
               for line in (world / "recall" / "retrieved_validation.jsonl").open()]
  examples = [json.loads(line) for line in
              (world / "world" / "open_qa" / "nq" / "dev.jsonl").open()]
  hits = [any(qa_metrics.has_answer(memory.bodies[memory.row(b)], e["answer"])
              for b in row[:5]) for row, e in zip(retrieved, examples, strict=True)]
  assert 100.0 * sum(hits) / len(hits) == pytest.approx(metrics["recall@5"])


def _async_pipeline(world, run):
  """A REALM pipeline whose index comes from a builder process, driven step by step."""
  from realm_bench import checkpoints  # pylint: disable=g-import-not-at-top
  from realm_bench.pipelines import realm  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  gin_utils.parse_gin(["runs/pretrain.gin", *OVERLAYS], _bindings(
      world, run, WARM_START=None, REFRESH_EVERY=2, REFRESH_MODE="async") +
      ["refresh.RefreshConfig.poll_seconds = 0.05"])
  model = gin.query_parameter("train_lib.train.model").scoped_configurable_fn()
  pipeline = gin.get_configurable(realm.RealmPipeline)()
  pipeline.setup(model=model, run_dir=world / run,
                 sequence_lengths=gin.get_configurable(SequenceLengths)())
  params = {"retriever": checkpoints.load_params(world / "ict" / "checkpoints")["retriever"]}
  return pipeline, params


def test_async_builder_serves_indexes_and_survives_being_killed(world, ict):
  import os, signal, time  # pylint: disable=g-import-not-at-top,multiple-imports
  pipeline, params = _async_pipeline(world, "async")
  refresher = pipeline.refresher
  (hook,) = pipeline.hooks()
  raw = next(iter(pipeline.stream(batch_size=2, seed=0)))
  try:
    # The loop's order: the refresh hook (waits for the first index only), then the batch.
    assert hook.before_step(0, params) == {"staleness": 0, "index_embedder_step": 0}
    pipeline.prepare(0, params, raw)
    assert refresher.wait_seconds > 0 and refresher.restarts == 0
    first_builder = refresher.builder_pid
    os.kill(first_builder, signal.SIGKILL)
    # Training goes on with the last good index; the builder is restarted and catches up.
    step, deadline = 1, time.monotonic() + 120
    while refresher.embedder_step < 2 and time.monotonic() < deadline:
      assert hook.before_step(step, params)["staleness"] == step - refresher.embedder_step
      pipeline.prepare(step, params, raw)
      step += 1
      time.sleep(0.05)
    assert refresher.restarts == 1 and refresher.builder_pid != first_builder
    assert refresher.embedder_step >= 2 and step > 2
    versions = sorted(p.name for p in (world / "async" / "index").glob("v*"))
    # The trainer prunes when it swaps (keep = 2); the builder may have written newer ones since.
    current = refresher.version_path.name
    assert current in versions and len([v for v in versions if v <= current]) <= 2
    stats = pipeline.summary()["stats"]
    assert stats["refresh_mode"] == "async" and stats["builder_restarts"] == 1
    assert stats["num_refreshes"] >= 2
  finally:
    pipeline.close()
  assert not refresher._process.is_alive()   # pylint: disable=protected-access


def test_async_pretraining_with_scann_runs_and_stops_its_builder(world, ict):
  import multiprocessing  # pylint: disable=g-import-not-at-top
  record = _train(world, "runs/pretrain.gin", "async_run", NUM_STEPS=6, REFRESH_EVERY=2,
                  REFRESH_MODE="async", WARM_START=str(ict),
                  extra_files=["retrieval/scann.gin"])
  assert not multiprocessing.active_children()
  rows = _metrics(world / "async_run")
  embedder_steps = [r["index_embedder_step"] for r in rows]
  assert embedder_steps[0] == 0 and embedder_steps == sorted(embedder_steps)
  assert all(r["staleness"] == r["step"] - 1 - r["index_embedder_step"] for r in rows)
  pipe = record.stats
  assert pipe["refresh_mode"] == "async" and pipe["num_refreshes"] >= 1
  assert pipe["staleness_max"] >= 1 and "refresh_overhead_seconds" in pipe
  latest = (world / "async_run" / "index" / "LATEST").read_text().strip()
  manifest = json.loads((world / "async_run" / "index" / latest / "manifest.json").read_text())
  assert manifest["kind"] == "scann" and manifest["builder"] == "async"
  assert manifest["recall@10"] > 0.9   # measured by the builder at every build


def test_index_command_embeds_the_corpus_and_builds_an_index(world, ict, capsys):
  from realm_bench import checkpoints  # pylint: disable=g-import-not-at-top
  from realm_bench.pipelines import base, open_qa  # pylint: disable=g-import-not-at-top
  from realm_bench.retrieval.index import load_index  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  args = ["index", "--gin_file=runs/index.gin", *[f"--gin_file={f}" for f in OVERLAYS],
          f"--gin.WORLD_DIR='{world / 'world'}'", f"--gin.VOCAB_PATH='{world / 'vocab.txt'}'",
          f"--gin.CHECKPOINT_FROM='{ict}'", f"--gin.INDEX_DIR='{world / 'built'}'",
          "--gin.EMBED_BATCH_SIZE=16", "--gin.SHARD_ROWS=32"]
  assert cli.main(args) == 0
  index = load_index(world / "built" / "index")
  assert index.manifest["embedder_step"] == 3 and index.manifest["blocks_per_second"] > 0
  assert not (world / "built" / "embeddings").exists()   # shards go once the index is saved
  # The same embeddings as the in-memory path the trainer's refresh uses.
  lengths = gin.get_configurable(SequenceLengths)()
  corpus = base.load_corpus("realm_bench.synthetic.corpus", lengths)
  model = gin.query_parameter("indexing.index.model").scoped_configurable_fn()
  params = {"retriever": checkpoints.load_params(ict / "checkpoints")["retriever"]}
  expected = np.asarray(model.embed_docs(params, corpus.doc_inputs))
  np.testing.assert_array_equal(index.ids, corpus.ids)
  np.testing.assert_allclose(index.embeddings, expected, atol=1e-5)
  capsys.readouterr()
  assert cli.main(args) == 0   # a rerun finds the index built from the same checkpoint
  assert "index already built" in capsys.readouterr().out
  # retrieval/scann.gin after runs/index.gin switches the kind, as the README shows.
  scann_args = [a.replace("'built'", "'built_scann'").replace(str(world / "built"),
                                                               str(world / "built_scann"))
                for a in args] + ["--gin_file=retrieval/scann.gin"]
  assert cli.main(scann_args) == 0
  assert load_index(world / "built_scann" / "index").manifest["kind"] == "scann"
  # Fine-tuning and evaluation can read it instead of embedding the corpus themselves.
  gin_utils.parse_gin(["runs/finetune.gin", *OVERLAYS], _bindings(
      world, "ft_prebuilt", WARM_START=None, INDEX_FROM=str(world / "built")))
  pipeline = gin.get_configurable(open_qa.OpenQAPipeline)()
  pipeline.setup(model=gin.query_parameter("train_lib.train.model").scoped_configurable_fn(),
                 run_dir=world / "ft_prebuilt", sequence_lengths=lengths)
  assert pipeline.index.manifest == index.manifest


def test_bert_stage_warm_starts_ict_and_the_readers_of_every_system(world):
  """The paper's lineage at small scale: BERT -> ICT -> REALM, and from BERT the ORQA, BM25 and
  closed-book readers; each system fine-tunes and is evaluated with a record of its own."""
  from realm_bench import checkpoints  # pylint: disable=g-import-not-at-top
  bert = _train(world, "runs/bert.gin", "bert", NUM_STEPS=3)
  assert bert.experiment == "bert" and bert.lineage is None
  ict = _train(world, "runs/ict.gin", "ict_from_bert", NUM_STEPS=1,
               BERT_RUN=str(world / "bert"), LEARNING_RATE=1e-12)
  assert ict.lineage == "bert"
  bert_params = checkpoints.load_params(world / "bert" / "checkpoints")
  ict_params = checkpoints.load_params(world / "ict_from_bert" / "checkpoints")
  np.testing.assert_allclose(   # one step at a negligible rate: still BERT's weights
      ict_params["retriever"]["embedder"]["bert"]["token_embed"]["embedding"],
      bert_params["reader"]["token_embed"]["embedding"], atol=1e-6)
  for experiment, overlay in (("bm25_reader", "experiments/bm25_reader.gin"),
                              ("closed_book", "experiments/closed_book.gin")):
    record = _train(world, "runs/finetune.gin", f"{experiment}_ft", NUM_STEPS=2,
                    BERT_RUN=str(world / "bert"), extra_files=[overlay])
    assert record.experiment == experiment and record.lineage == "bert"
    gin_utils.parse_gin(["runs/evaluate.gin", *OVERLAYS, overlay], _bindings(
        world, f"{experiment}_eval", CHECKPOINT_FROM=str(world / f"{experiment}_ft"),
        EXPERIMENT=experiment, DATASET="nq", BERT_RUN=None))
    metrics = gin.get_configurable(eval_lib.evaluate)()
    evaluation = read_record(world / f"{experiment}_eval")
    assert evaluation.metrics == metrics and evaluation.lineage == f"{experiment}_ft"
    assert len(evaluation.outcomes) == evaluation.num_examples
    assert evaluation.outcomes.count("1") == round(metrics["exact_match"] *
                                                    evaluation.num_examples / 100)
  manifest = read_record(world / "bm25_reader_eval").index_manifests[0]
  assert manifest["kind"] == "bm25"


def test_reference_points_and_the_summary_read_from_records(world, tmp_path):
  from realm_bench import baselines  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting import summary  # pylint: disable=g-import-not-at-top
  points = baselines.reference_points(world_dir=world / "world", runs_dir=tmp_path, split="dev")
  assert points["oracle"] == {"recall@1": 100.0}
  assert 0 <= points["answer_prior"]["exact_match"] <= 100
  assert read_record(tmp_path / "bm25_nq_dev").recall_matcher == "string"
  text = summary.quickstart_summary(tmp_path)
  assert "| answer prior |" in text and "| oracle (gold block) | 100.0 |" in text
