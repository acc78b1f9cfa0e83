"""`realm_bench.tasks.configure(...)`: the tasks' data folders set from Python, without gin.

Kept apart from `config` (the stored paths, which the readers import) because it checks the
vocabulary and registers the tasks, i.e. imports the modules that read `config`.
"""
from __future__ import annotations

from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.tasks import config


def _folder(value, name: str) -> Path | None:
  if value is None:
    return None
  path = Path(value).expanduser()
  if not path.is_dir():
    raise InputError(f"{config.API}({name}=...): folder does not exist", path=path, field=name)
  return path


def configure(*, world_dir=None, data_dir=None, vocab_path=None) -> config.Paths:
  """Sets where every realm-bench task reads from, and registers the tasks with seqio.

  world_dir: a synthetic world (`realm-bench world --out DIR`), read by realm_bench.synthetic.*.
  data_dir: the real data, laid out as `realm_bench/tasks/data.py` describes, read by the rest.
  vocab_path: a BERT uncased vocab.txt ([PAD] on line 1), the tokenizer of every task.

  Each call replaces all three (an argument left out is unset again, so `configure()` undoes
  it). Folders and the vocabulary are checked now, so a wrong path fails here, naming the
  argument, not later inside a tf.data pipeline. Returns the paths set.
  """
  paths = config.Paths(world_dir=_folder(world_dir, "world_dir"),
                       data_dir=_folder(data_dir, "data_dir"),
                       vocab_path=None if vocab_path is None else Path(vocab_path).expanduser())
  if paths.vocab_path is not None:
    from realm_bench.tasks import vocab  # pylint: disable=g-import-not-at-top
    try:
      vocab.get_vocabulary(paths.vocab_path)
    except InputError as e:
      raise InputError(f"{config.API}(vocab_path=...): {e.reason}", path=e.path, line=e.line,
                       field=e.field) from None
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  config.set_paths(paths)
  return paths
