"""Stages done / left and an ETA for a long driver (`realm-bench reproduce`).

The plan is known before anything runs (a dry pass of the driver lists every stage with its
size), so the ETA is the remaining stages' sizes times a rate per kind of stage: the rate this
process has measured once it has run a stage of that kind, until then a prior from a
measured reproduction (2 idle CPU cores, `sizes/tiny.gin`). It is an estimate and is
printed as one.
"""
from __future__ import annotations

import dataclasses
import re
import time

# Seconds per unit of work, from seed 1 of the reproduction on the quickstart's world
# (results/EXPERIMENTS.md E101: 2 idle CPU cores, 900 fine-tuning steps, the Makefile's malloc
# settings; without them fine-tunings took 1.3-1.5x longer, E100): a training's unit is one
# example (steps x batch); a pre-training's index refresh counts as REFRESH_UNITS examples; an
# evaluation or a recall is one unit.
PRIOR_SECONDS = {"bert": 111 / (600 * 128), "ict": 255 / (1000 * 64),
                 "pretrain": 128 / (300 * 16 + 70 * 15), "finetune": 175 / (900 * 12),
                 "evaluate": 7.0, "recall": 12.0, "train": 175 / (900 * 12)}
REFRESH_UNITS = 70


@dataclasses.dataclass(frozen=True)
class Planned:
  name: str     # the run folder, relative to the runs root
  kind: str     # bert | ict | pretrain | finetune | evaluate | recall
  units: float
  done: bool    # its record exists already


def _macro(bindings, name) -> int | None:
  """The last whole-number binding of macro `name` (the last wins, as in gin)."""
  found = None
  for binding in bindings:
    if m := re.fullmatch(rf"{name}\s*=\s*(\d+)", binding.strip()):
      found = int(m.group(1))
  return found


def training_units(kind: str, bindings) -> float:
  """A training's size from its NUM_STEPS / BATCH_SIZE (/ REFRESH_EVERY) bindings."""
  steps = _macro(bindings, "NUM_STEPS") or 0
  units = steps * (_macro(bindings, "BATCH_SIZE") or 1)
  refresh = _macro(bindings, "REFRESH_EVERY")
  if kind == "pretrain" and refresh:
    units += REFRESH_UNITS * (steps // refresh)
  return float(units)


def _duration(seconds: float) -> str:
  minutes = round(seconds / 60)
  return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"


class Progress:
  """Told of each stage as it finishes; says how many are done and left, and the ETA."""

  def __init__(self, plan: list[Planned], *, label: str = "reproduce", lanes: int = 1):
    self.plan = {p.name: p for p in plan}
    self.label = label
    self.lanes = lanes   # stages run this many at a time (reproduce's lanes)
    self.finished = {p.name for p in plan if p.done}
    self.measured: dict[str, list[tuple[float, float]]] = {}   # kind -> [(seconds, units)]
    self.started = time.perf_counter()

  def rate(self, kind: str) -> float:
    """Measured seconds per unit; the first stage of a kind also compiled its programs, so
    it is left out once there are others."""
    samples = self.measured.get(kind, [])[1:] or self.measured.get(kind, [])
    units = sum(u for _, u in samples)
    return sum(s for s, _ in samples) / units if units else PRIOR_SECONDS[kind]

  def seconds_left(self) -> float:
    return sum(p.units * self.rate(p.kind) for p in self.plan.values()
               if p.name not in self.finished) / self.lanes

  def summary(self) -> str:
    left = len(self.plan) - len(self.finished)
    return (f"{len(self.finished)}/{len(self.plan)} stages done, {left} left, "
            f"ETA ~{_duration(self.seconds_left())} (estimated)")

  def stage_done(self, name: str, kind: str, seconds: float, skipped: bool, *,
                 done: set[str] = frozenset()) -> None:
    """`done`: stages finished elsewhere meanwhile (another lane's)."""
    planned = self.plan.get(name)
    if planned is None:
      return
    if not skipped and planned.units:
      self.measured.setdefault(planned.kind, []).append((seconds, planned.units))
    self.finished |= {name, *(d for d in done if d in self.plan)}
    if not skipped:
      print(f"[{self.label} {time.strftime('%H:%M:%S')}] {name} took {seconds:.0f} s; "
            f"{self.summary()}", flush=True)
