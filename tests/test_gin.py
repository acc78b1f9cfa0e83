"""Every shipped gin file parses, and bad configs fail before any work, naming the culprit."""
from __future__ import annotations

import pytest

from realm_bench import cli, gin_utils
from realm_bench.errors import InputError

GIN_FILES = gin_utils.all_gin_files()
# Values for every REQUIRED macro a run file declares; parsing must not need real folders.
DUMMY = {"RUN_DIR": "'/nonexistent/run'", "WARM_START": "None", "CHECKPOINT_FROM": "'/x'",
         "EXPERIMENT": "'realm'", "DATASET": "'nq'", "OUTPUT": "'/x/p.jsonl'",
         "INDEX_DIR": "'/x/index'"}


def _relative(path) -> str:
  return str(path.relative_to(gin_utils.gin_dir()))


def test_gin_files_are_found():
  names = {_relative(p) for p in GIN_FILES}
  assert {"tasks.gin", "sizes/tiny.gin", "sizes/base.gin", "runs/pretrain.gin",
          "runs/finetune.gin", "runs/ict.gin", "runs/evaluate.gin"} <= names


@pytest.mark.parametrize("path", GIN_FILES, ids=_relative)
def test_every_gin_file_parses(path):
  required = gin_utils.required_macros_in(path)
  for included in ("runs/finetune.gin", "runs/ict.gin", "runs/pretrain.gin"):
    if f"include '{included}'" in path.read_text():
      required += gin_utils.required_macros_in(gin_utils.gin_dir() / included)
  bindings = [f"{name} = {DUMMY[name]}" for name in set(required)]
  gin_utils.parse_gin([_relative(path)], bindings)


def test_run_headers_list_their_required_macros():
  for path in GIN_FILES:
    if _relative(path).startswith("runs/"):
      for name in gin_utils.required_macros_in(path):
        assert name in path.read_text().split("from __gin__")[0], (path, name)


def test_missing_required_macro_fails_naming_it():
  with pytest.raises(InputError, match="RUN_DIR"):
    gin_utils.parse_gin(["runs/ict.gin"], [])


def test_unknown_configurable_names_the_file(tmp_path):
  bad = tmp_path / "bad.gin"
  bad.write_text("include 'runs/ict.gin'\nRUN_DIR = '/x'\nno_such_module.thing = 3\n")
  with pytest.raises(InputError) as e:
    gin_utils.parse_gin([str(bad)], [])
  assert str(bad) in str(e.value) and "no_such_module" in str(e.value)


def test_bad_binding_on_the_command_line_exits_2(capsys):
  code = cli.main(["train", "--gin_file=runs/ict.gin", "--gin.RUN_DIR='/x'",
                   "--gin.train_lib.train.no_such_parameter=1"])
  assert code == 2
  assert "no_such_parameter" in capsys.readouterr().err
