"""What the training loop and the input pipelines share, so neither imports the other.

- `DeterministicIterator`: batches that can report and jump to their position, which is what
  makes a resumed run replay exactly the data an uninterrupted one would have seen.
- `StepHook`: host-side work around each step (t5x calls these actions). REALM's index
  refresh is one: it runs between steps, reports the index's staleness as host metrics and
  saves what a resume needs (which index version) in every checkpoint.
- `HOST_METRICS_KEY`: where a prepared batch may carry host-side numbers for the step's log.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Iterator, Mapping

from realm_bench.errors import InputError

HOST_METRICS_KEY = "__metrics__"
# The checkpoint field the iterator's state is saved under (errors name it).
DATA_STATE_FIELD = "data_iterator"


class StepHook:
  """Host-side work around every training step; the defaults do nothing.

  `before_step(step, params)` runs before the batch of update `step + 1` is prepared (`step`
  updates are done) and returns host metrics for that step's log; `after_step(step, metrics)`
  runs once `step` updates are done and returns True to stop training after a checkpoint.
  `state()` is saved in every checkpoint under the hook's `name`, and `restore(state, params,
  step)` receives it back when a run resumes. The parameters passed in are donated to the next
  step: use them within the call, never keep them.
  """
  name: str = "hook"

  def before_step(self, step: int, params) -> Mapping[str, float]:
    del step, params
    return {}

  def after_step(self, step: int, metrics: Mapping[str, float]) -> bool:
    del step, metrics
    return False

  def state(self) -> dict:
    return {}

  def restore(self, state: Mapping[str, Any], params, step: int) -> None:
    del state, params, step

  def summary(self) -> dict:
    """What the run record says of this hook (e.g. refresh statistics)."""
    return {}


class StopAtStep(StepHook):
  """Ends this process after `stop_at_step` updates, as a preemption would (the schedule still
  runs to the full step count when the command is rerun)."""
  name = "stop_at_step"

  def __init__(self, stop_at_step: int):
    self.stop_at_step = int(stop_at_step)

  def after_step(self, step, metrics):
    del metrics
    return step >= self.stop_at_step


class DeterministicIterator:
  """A batch iterator that can report and jump to its position, so resume replays the data.

  Protocol the loop relies on: `next()`, `get_state() -> JSON dict`, `set_state(dict)`.
  `make_iterator(seed, position)` must yield the batches from `position` on (it may skip
  efficiently, e.g. by seeking in a file); `from_iterable` wraps anything that restarts from
  the beginning on each `iter()` and skips by consuming.
  """

  def __init__(self, make_iterator: Callable[[int, int], Iterable[Mapping[str, Any]]], *,
               seed: int = 0, position: int = 0):
    self._make_iterator = make_iterator
    self.seed = int(seed)
    self.position = int(position)
    self._iterator: Iterator | None = None
    self._peeked: list = []

  @classmethod
  def from_iterable(cls, iterable: Iterable[Mapping[str, Any]], *,
                    seed: int = 0) -> DeterministicIterator:
    return cls(lambda _, position: itertools.islice(iter(iterable), position, None), seed=seed)

  def __iter__(self) -> DeterministicIterator:
    return self

  def __next__(self) -> Mapping[str, Any]:
    item = self.peek()
    self._peeked.clear()
    self.position += 1
    return item

  def peek(self) -> Mapping[str, Any]:
    """The next batch without consuming it (e.g. to initialise parameters from its shapes)."""
    if not self._peeked:
      if self._iterator is None:
        self._iterator = iter(self._make_iterator(self.seed, self.position))
      self._peeked.append(next(self._iterator))
    return self._peeked[0]

  def get_state(self) -> dict[str, int]:
    return {"seed": self.seed, "position": self.position}

  def set_state(self, state: Mapping[str, Any]) -> None:
    for key in ("seed", "position"):
      if not isinstance(state.get(key), int) or state[key] < 0:
        raise InputError(f"expected a non-negative integer, got {state.get(key)!r}",
                         field=f"{DATA_STATE_FIELD}.{key}")
    if state["seed"] != self.seed:
      raise InputError(f"the checkpoint's data were drawn with seed {state['seed']}, this run "
                       f"uses seed {self.seed}", field=f"{DATA_STATE_FIELD}.seed")
    self.position = state["position"]
    self._iterator = None
    self._peeked.clear()
