"""Every shipped gin file parses, and bad configs fail before any work, naming the culprit."""
from __future__ import annotations

import gin
import pytest

from realm_bench import cli, gin_utils
from realm_bench.errors import InputError

GIN_FILES = gin_utils.all_gin_files()
# Values for every REQUIRED macro a run file declares; parsing must not need real folders.
DUMMY = {"RUN_DIR": "'/nonexistent/run'", "WARM_START": "None", "CHECKPOINT_FROM": "'/x'",
         "EXPERIMENT": "'realm'", "DATASET": "'nq'", "OUTPUT": "'/x/p.jsonl'",
         "INDEX_DIR": "'/x/index'", "REALM_RUN": "None"}


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


# --- strict macros, t5x flags, help -----------------------------------------------------------


def _ict(tmp_path, *extra):
  """A `train` command line whose run folder would be tmp_path/run."""
  return ["train", "--gin_file=runs/ict.gin", f"--gin.RUN_DIR='{tmp_path / 'run'}'", *extra]


def test_misspelt_macro_on_the_command_line_names_the_closest(tmp_path, capsys):
  assert cli.main(_ict(tmp_path, "--gin.NUM_STEP=5")) == 2
  err = capsys.readouterr().err
  assert "NUM_STEP " in err and "did you mean NUM_STEPS?" in err
  assert "Traceback" not in err and not (tmp_path / "run").exists()


def test_unread_macro_in_a_user_file_names_file_and_line(tmp_path):
  mine = tmp_path / "mine.gin"
  mine.write_text("include 'runs/ict.gin'\nRUN_DIR = '/x'\nLEARNIG_RATE = 1e-3\n")
  with pytest.raises(InputError) as e:
    gin_utils.parse_gin([str(mine)], [], strict=True)
  assert e.value.path == str(mine) and e.value.line == 3
  assert "LEARNIG_RATE" in str(e.value) and "LEARNING_RATE" in str(e.value)
  # Shipped overlays set macros for several kinds of run: not refused.
  gin_utils.parse_gin(["runs/ict.gin", "testing/tiny.gin"], ["RUN_DIR = '/x'"], strict=True)


def test_unknown_parameter_names_the_closest(capsys):
  assert cli.main(["train", "--gin_file=runs/ict.gin", "--gin.RUN_DIR='/x'",
                   "--gin.train_lib.train.num_step=1"]) == 2
  assert "did you mean num_steps?" in capsys.readouterr().err


def test_search_paths_find_a_users_folder_with_includes(tmp_path, monkeypatch):
  folder = tmp_path / "my_gin"
  (folder / "base").mkdir(parents=True)
  (folder / "base" / "short.gin").write_text("include 'runs/ict.gin'\nNUM_STEPS = 7\n")
  (folder / "exp.gin").write_text("include 'base/short.gin'\nRUN_DIR = '/x'\n")
  monkeypatch.chdir(tmp_path / "my_gin" / "base")  # neither the checkout nor the folder
  parsed = gin_utils.parse_gin(["exp.gin"], ["BATCH_SIZE = 3"], search_paths=[str(folder)],
                               strict=True)
  assert gin.query_parameter("%NUM_STEPS") == 7 and gin.query_parameter("%BATCH_SIZE") == 3
  assert folder / "base" / "short.gin" in parsed.files
  # The same through the command line: --gin_search_paths, --gin_bindings, and the user's
  # included file checked too.
  (folder / "base" / "short.gin").write_text("include 'runs/ict.gin'\nNUM_STEP = 7\n")
  with pytest.raises(InputError) as e:
    gin_utils.parse_gin(["exp.gin"], [], search_paths=[str(folder)], strict=True)
  assert e.value.path.endswith("short.gin") and e.value.line == 2


def test_gin_bindings_and_search_paths_flags(tmp_path, capsys):
  (tmp_path / "exp.gin").write_text("include 'runs/ict.gin'\n")
  code = cli.main(["train", f"--gin_search_paths={tmp_path},/nonexistent", "--gin_file=exp.gin",
                   f"--gin_bindings=RUN_DIR = '{tmp_path / 'run'}'",
                   "--gin_bindings=WARMUP_STEP = 0"])
  assert code == 2
  err = capsys.readouterr().err
  assert "WARMUP_STEP = 0" in err and "did you mean WARMUP_STEPS?" in err


def test_version(capsys):
  with pytest.raises(SystemExit) as e:
    cli.main(["--version"])
  assert e.value.code == 0
  assert capsys.readouterr().out.startswith("realm-bench ")


def test_every_flag_says_its_default():
  parser = cli.build_parser()
  subparsers = next(a for a in parser._actions if a.choices)  # pylint: disable=protected-access
  for name, sub in subparsers.choices.items():
    formatter = sub._get_formatter()  # pylint: disable=protected-access
    for action in sub._actions:  # pylint: disable=protected-access
      if action.option_strings and action.dest != "help":
        text = formatter._expand_help(action)  # pylint: disable=protected-access
        assert "default" in text or "required" in text, (name, action.option_strings, text)


def test_bindings_of_configurables_the_command_never_called_are_refused_when_it_ends():
  from realm_bench.retrieval.index import ExactIndex  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top
  bindings = ["RUN_DIR = '/x'", "WORLD_DIR = '/w'", "VOCAB_PATH = '/v'",
              "SequenceLengths.query = 12", "reader/BertConfig.num_layers = 3",
              "ScannIndex.num_leaves = 7"]
  parsed = gin_utils.parse_gin(["runs/ict.gin"], bindings, strict=True)
  assert [text for text, _ in parsed.bound] == bindings[3:]
  del ExactIndex
  gin.get_configurable(SequenceLengths)()
  with gin.config_scope("reader"):
    gin.get_configurable("realm_bench.networks.bert.BertConfig")()
  with pytest.raises(InputError) as e:
    gin_utils.refuse_uncalled_bindings(parsed)
  assert "ScannIndex.num_leaves" in str(e.value)
  assert "SequenceLengths" not in str(e.value) and "num_layers" not in str(e.value)
