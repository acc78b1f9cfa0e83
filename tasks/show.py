"""`realm-bench tasks [NAME] [--split S] [--num N]`: list the tasks, or show decoded examples.

Seeing the exact ids a model receives, decoded back to wordpieces, is the quickest way to
check a vocabulary, a length budget or a masking strategy before spending compute on it.
`gin/tasks.gin` is always parsed first, so WORLD_DIR, DATA_DIR, VOCAB_PATH, QUERY_LEN,
BLOCK_LEN and MASKING can be set with --gin.NAME=VALUE alone.
"""
from __future__ import annotations

import numpy as np

from realm_bench.errors import InputError
from realm_bench.tf_runtime import tf  # TensorFlow kept off the accelerators

DEFAULT_GIN_FILE = "tasks.gin"


def _describe(task) -> str:
  metrics = ", ".join(getattr(f, "__name__", repr(f)) for f in task.metric_fns)
  line = f"{task.name:40s} {task.source!r}"
  return line + (f"  metric: {metrics}" if metrics else "")


def _format(value, feature) -> str:
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if isinstance(value, np.ndarray) and value.dtype == object:
    return repr([v.decode("utf-8") for v in value.tolist()])
  if feature is not None and hasattr(feature.vocabulary, "resolve"):
    return f"{feature.vocabulary.decode(value.tolist())}   ({len(value)} ids: {value.tolist()})"
  if isinstance(value, np.ndarray):
    return str(value.tolist())
  return str(value)


def show(name: str, *, split: str, num: int, sequence_lengths) -> None:
  """Prints `num` examples of a task split, with the ids decoded."""
  import seqio  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import corpus  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import data  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import registry  # pylint: disable=g-import-not-at-top

  if name not in registry.task_names():
    raise InputError(f"unknown task {name!r}; known: {', '.join(registry.task_names())}")
  task = seqio.get_mixture_or_task(name)
  if split not in task.splits:
    raise InputError(f"task {name} has no split {split!r}; it has {', '.join(task.splits)}")
  lengths = (sequence_lengths.for_blocks() if name in corpus.TASK_NAMES
             else sequence_lengths.for_queries())
  ds = task.get_dataset(sequence_length=lengths, split=split, shuffle=False).take(num)
  try:
    for i, ex in enumerate(ds.as_numpy_iterator(), start=1):
      print(f"{name}  {split}  example {i}")
      for key in sorted(ex):
        print(f"  {key}: {_format(ex[key], task.output_features.get(key))}")
  except tf.errors.OpError as e:
    error = data.input_error_from(e)
    if error is None:
      raise
    raise error from None


def listing() -> str:
  """One line per realm-bench task: name, source, metric and splits."""
  import seqio  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import registry  # pylint: disable=g-import-not-at-top
  lines = []
  for name in registry.task_names():
    task = seqio.get_mixture_or_task(name)
    lines.append(f"{_describe(task)}  splits: {', '.join(task.splits)}")
  return "\n".join(lines)
