"""Bad values for `train` fail before any work, naming the field; a failed set-up leaves no
run folder behind (and never removes one that was there)."""
from __future__ import annotations

import pytest

from realm_bench import cli


@pytest.fixture
def ict(tmp_path):
  """A `train` command line over an empty world and a tiny vocabulary: gin resolves every
  argument, so only train's own checks and set-up can fail."""
  (tmp_path / "world").mkdir()
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\n")
  run = tmp_path / "runs" / "ict"

  def command(*bindings):
    return ["train", "--gin_file=runs/ict.gin", f"--gin.RUN_DIR='{run}'",
            f"--gin.WORLD_DIR='{tmp_path / 'world'}'", f"--gin.VOCAB_PATH='{vocab}'",
            *bindings]
  command.run = run
  return command


@pytest.mark.parametrize("bindings, field, shown", [
    (["--gin.NUM_STEPS='abc'"], "num_steps", "'abc' (set by the gin macro NUM_STEPS)"),
    (["--gin.BATCH_SIZE=-4", "--gin.WARMUP_STEPS=0"], "batch_size", "-4"),
    (["--gin.BATCH_SIZE=-4"], "batch_size", "-4"),
    (["--gin.NUM_STEPS=5"], "warmup_steps", "<= 5, got 100"),
    (["--gin.LEARNING_RATE=-1e-4"], "learning_rate", "-0.0001"),
    (["--gin.SEED=True"], "seed", "True"),
])
def test_bad_values_name_their_field(ict, capsys, bindings, field, shown):
  assert cli.main(ict(*bindings)) == 2
  err = capsys.readouterr().err
  assert f"field '{field}'" in err and shown in err, err
  assert "Traceback" not in err and "In call to configurable" not in err
  assert not ict.run.parent.exists()


def test_failed_set_up_leaves_no_run_folder(ict, capsys):
  # Valid values, but the world folder is empty: the pipeline's set-up refuses it.
  assert cli.main(ict("--gin.NUM_STEPS=5", "--gin.WARMUP_STEPS=0")) == 2
  assert "blocks.jsonl" in capsys.readouterr().err
  assert not ict.run.parent.exists()
  # A warm start that does not exist: refused during set-up too.
  assert cli.main(ict("--gin.NUM_STEPS=5", "--gin.WARMUP_STEPS=0",
                      f"--gin.BERT_RUN='{ict.run.parent / 'nope'}'")) == 2
  assert not ict.run.parent.exists()
  # A folder that was there (a run being resumed) is left as it was.
  ict.run.mkdir(parents=True)
  (ict.run / "notes.txt").write_text("mine")
  assert cli.main(ict("--gin.NUM_STEPS=5", "--gin.WARMUP_STEPS=0")) == 2
  assert sorted(p.name for p in ict.run.iterdir()) == ["notes.txt"]


def _entry_calls(tmp_path):
  from realm_bench import eval as eval_lib, indexing, infer  # pylint: disable=g-import-not-at-top
  run, lengths = str(tmp_path / "run"), None
  common = dict(model=None, checkpoint_from=str(tmp_path / "ft"), sequence_lengths=lengths)
  return {
      "evaluate": lambda **kw: eval_lib.evaluate(
          pipeline=None, run_dir=run, experiment="realm", dataset="nq",
          **{**common, **kw}),
      "evaluate_retrieval": lambda **kw: eval_lib.evaluate_retrieval(
          run_dir=run, experiment="realm", dataset="nq", qa_task="realm_bench.synthetic.nq_open",
          corpus_task="c",
          **{**common, **kw}),
      "infer": lambda **kw: infer.infer(pipeline=None, output=str(tmp_path / "p.jsonl"),
                                        **{**common, **kw}),
      "index": lambda **kw: indexing.index(corpus_task="c", out_dir=run,
                                           **{**common, **kw}),
  }


@pytest.mark.parametrize("entry, bad, field", [
    ("evaluate", {"batch_size": 0}, "batch_size"),
    ("evaluate", {"split": "dev"}, "split"),
    ("evaluate", {"scale": "huge"}, "scale"),
    ("evaluate", {"checkpoint_from": None}, "checkpoint_from"),
    ("evaluate_retrieval", {"k": "5"}, "k"),
    ("evaluate_retrieval", {"matcher": "fuzzy"}, "matcher"),
    ("evaluate_retrieval", {"retriever": "sparse"}, "retriever"),
    ("infer", {"batch_size": -1}, "batch_size"),
    ("infer", {"split": "valid"}, "split"),
    ("index", {"step": -3}, "step"),
    ("index", {"shard_rows": 0}, "shard_rows"),
    ("index", {"batch_size": 2.5}, "batch_size"),
])
def test_evaluation_entries_check_their_arguments_before_any_work(tmp_path, entry, bad, field):
  from realm_bench.errors import InputError  # pylint: disable=g-import-not-at-top
  with pytest.raises(InputError) as caught:
    _entry_calls(tmp_path)[entry](**bad)
  assert f"field '{field}'" in str(caught.value) or caught.value.field == field
  assert not any(tmp_path.iterdir())       # nothing was written
