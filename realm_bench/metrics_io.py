"""Per-step training metrics: `metrics.jsonl` for machines, TensorBoard for people.

`metrics.jsonl` is the reproducible record: one JSON object per logged step, appended with
flush + fsync so a killed run loses at most the line being written. When a run resumes from a
checkpoint, lines after the checkpoint's step are dropped first, so the resumed run's file ends
up identical to an uninterrupted run's. Values that differ between identical runs (speed) are
therefore written to TensorBoard only.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Mapping

import jax

from realm_bench import io_utils
from realm_bench.errors import InputError

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tb"


def _json_value(value: float) -> float | None:
  value = float(value)
  return value if math.isfinite(value) else None


class MetricsWriter:
  """Appends metrics rows under `run_dir`; `tensorboard=False` skips importing TensorFlow.

  With several JAX processes only the first writes (metrics are already global means).
  """

  def __init__(self, run_dir, *, tensorboard: bool = True):
    self.run_dir = Path(run_dir)
    self.path = self.run_dir / METRICS_FILE
    self._tensorboard = tensorboard
    self._summary_writer = None
    self._active = jax.process_index() == 0

  def truncate_after(self, step: int) -> None:
    """Drops rows with step > `step` (and a torn last line from a killed write)."""
    if not self._active or not self.path.exists():
      return
    with open(self.path, encoding="utf-8") as f:
      lines = f.read().split("\n")
    # The file ends with a newline, so the last element is "" or a torn partial row.
    complete, torn = lines[:-1], lines[-1]
    kept = []
    for lineno, raw in enumerate(complete, start=1):
      try:
        row_step = json.loads(raw)["step"]
      except (ValueError, KeyError, TypeError):
        raise InputError("not a metrics row with a 'step'", path=self.path, line=lineno,
                         field="step") from None
      if row_step <= step:
        kept.append(raw + "\n")
    if len(kept) != len(complete) or torn:
      io_utils.atomic_write_text(self.path, "".join(kept))

  def write(self, step: int, metrics: Mapping[str, float], *,
            volatile: Mapping[str, float] | None = None) -> None:
    """Appends `metrics` for `step`; `volatile` values (timings) go to TensorBoard only."""
    if not self._active:
      return
    row = {"step": int(step), **{k: _json_value(v) for k, v in metrics.items()}}
    self.run_dir.mkdir(parents=True, exist_ok=True)
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(io_utils.dumps(row, sort_keys=True) + "\n")
      f.flush()
      os.fsync(f.fileno())
    if self._tensorboard:
      writer = self._writer()
      for name, value in {**metrics, **(volatile or {})}.items():
        if math.isfinite(float(value)):
          writer.scalar(name, float(value), int(step))
      writer.flush()

  def write_summary(self, step: int, *, scalars: Mapping[str, float] = (),
                    texts: Mapping[str, str] = ()) -> None:
    """TensorBoard only: an evaluation's metrics, a run's operative gin config (as t5x shows
    it, in a text panel), where metrics.jsonl is the training curve alone."""
    if not (self._active and self._tensorboard):
      return
    writer = self._writer()
    for name, value in dict(scalars).items():
      if math.isfinite(float(value)):
        writer.scalar(name, float(value), int(step))
    for name, text in dict(texts).items():
      writer.text(name, text, int(step))
    writer.flush()

  def _writer(self):
    if self._summary_writer is None:
      # Imported here: flax's writer pulls in TensorFlow, which costs seconds at start-up.
      from flax.metrics import tensorboard  # pylint: disable=g-import-not-at-top
      self._summary_writer = tensorboard.SummaryWriter(str(self.run_dir / TENSORBOARD_DIR),
                                                       auto_flush=False)
    return self._summary_writer

  def close(self) -> None:
    if self._summary_writer is not None:
      self._summary_writer.close()
      self._summary_writer = None
