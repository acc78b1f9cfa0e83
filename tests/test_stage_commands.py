"""A driver's stage records the standalone command it stands for, and that command reruns it;
the stages pass the quickstart's settings and a caller's extra bindings."""
from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from realm_bench import cli, gin_utils
from realm_bench import eval as eval_lib
from realm_bench import stages as stages_lib
from realm_bench.errors import InputError
from realm_bench.reporting.records import command_line, read_record


def test_stage_command_keeps_what_binds_and_round_trips_through_the_command_line():
  bindings = ["SEED = 0", "RUN_DIR = \"runs/it's here\"", "train_lib.train.seed = 3",
              "WORLD_DIR = 'w $HOME'", "scope/NUM_STEPS = 2"]
  args = stages_lib.stage_command(eval_lib.evaluate_retrieval, ["runs/evaluate_retrieval.gin",
                                                                "testing/tiny.gin"], bindings,
                                  read={"RUN_DIR", "WORLD_DIR", "scope/NUM_STEPS"})
  assert args[:3] == ["recall", "--gin_file=runs/evaluate_retrieval.gin",
                      "--gin_file=testing/tiny.gin"]
  text = command_line(args)
  rest, flag_bindings = gin_utils.split_gin_args(shlex.split(text)[1:])
  # SEED is read by nothing here (the strict command line would refuse it); the rest, in order.
  assert flag_bindings == [b for b in bindings if b != "SEED = 0"]
  assert cli.build_parser().parse_args(rest).gin_file == ["runs/evaluate_retrieval.gin",
                                                          "testing/tiny.gin"]
  # A binding --gin.KEY=VALUE cannot carry: every binding as --gin_bindings, order kept.
  multi = stages_lib.stage_command(eval_lib.evaluate, ["runs/evaluate.gin"],
                                   ["A = 1", "B = [1,\n 2]"], read={"A", "B"})
  assert multi[2:] == ["--gin_bindings=A = 1", "--gin_bindings=B = [1,\n 2]"]
  parsed = cli.build_parser().parse_args(shlex.split(command_line(multi))[1:])
  assert parsed.gin_bindings == ["A = 1", "B = [1,\n 2]"]


def test_a_stage_reruns_from_its_recorded_command(world, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)   # relative folders, as a user gives them to a driver
  Path("shared").symlink_to(world)
  # Sizes unlike the defaults of bert.gin and testing/tiny.gin, so a binding the command
  # dropped would change the rerun.
  config = stages_lib.QuickstartConfig(extra_gin=("testing/tiny.gin",), seed=1, bert_steps=3,
                                       bert_batch=2, bert_lr=3e-3)
  s = stages_lib.Stages(Path("first"), config, world=Path("shared/world"),
                        vocab=Path("shared/vocab.txt"))
  first = read_record(stages_lib.bert_stage(s))
  assert first.command.startswith("realm-bench train --gin_file=runs/bert.gin ")
  assert str(tmp_path) not in first.command and "RUN_DIR=\"'first/runs/bert'\"" in first.command
  # Rerun into another folder: the recorded command with RUN_DIR bound again after it.
  argv = [*shlex.split(first.command)[1:], "--gin.RUN_DIR='again'"]
  assert cli.main(argv) == 0
  again = read_record(Path("again"))
  assert again.steps == first.steps == 3
  assert again.metrics == first.metrics
  assert again.command == command_line(argv)   # a run started from the CLI keeps its argv


class _Recorded(stages_lib.Stages):
  """Stages that record what each stage would train instead of training it."""

  def train(self, name, gin_files, bindings, *, kind="train"):
    self.trained = (name, list(gin_files), list(bindings))
    return self.runs / name


def test_ict_warms_up_over_its_configured_fraction_and_extra_bindings_come_last(tmp_path):
  s = _Recorded(tmp_path, stages_lib.QuickstartConfig(ict_steps=20, ict_warmup_fraction=0.3))
  stages_lib.ict_stage(s, tmp_path / "bert", name="ict_x", extra=["SEED = 3"])
  name, files, bindings = s.trained
  assert name == "ict_x" and files == ["runs/ict.gin"]
  assert "WARMUP_STEPS = 6" in bindings and bindings[-1] == "SEED = 3"
  stages_lib.bert_stage(s, name="bert_x", extra=["NEGATIVE_RATE = 0.5"])
  assert s.trained[0] == "bert_x" and s.trained[2][-1] == "NEGATIVE_RATE = 0.5"
  assert not any("siblings_per_block" in b for b in bindings)   # ORQA's batches unless asked
  s.config = stages_lib.QuickstartConfig(ict_siblings_per_block=7)
  stages_lib.ict_stage(s, tmp_path / "bert")
  assert "ict.IctPipeline.siblings_per_block = 7" in s.trained[2]
  s.config = stages_lib.QuickstartConfig(ict_warmup_fraction=1.5)
  with pytest.raises(InputError, match="QuickstartConfig.ict_warmup_fraction"):
    stages_lib.ict_stage(s, tmp_path / "bert")


def test_make_world_names_the_fields_that_differ_from_the_default_world(tmp_path, capsys):
  import dataclasses  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  config = dataclasses.replace(world_lib.WorldConfig(), num_people=12, num_places=4,
                               num_organisations=4, num_regions=2, topic_fraction=1.0)
  stages = stages_lib.Stages(tmp_path, stages_lib.QuickstartConfig(vocab_size=200))
  stages_lib.make_world(stages, config)
  said = capsys.readouterr().out
  assert ("seed 0; num_people=12, num_places=4, num_organisations=4, num_regions=2, "
          "topic_fraction=1.0)") in said
