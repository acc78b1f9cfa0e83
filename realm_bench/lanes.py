"""A reproduction's stages in parallel lanes: one process per core, each single-threaded.

Why: the synthetic world's networks are small (2 layers x 128), and XLA's CPU runtime spreads
one such stage over two cores poorly; two single-threaded stages side by side finish more
work per second (`benchmarks/stage_lanes.py`). Most of a reproduction's stages are independent
of each other once their pre-trained runs exist (18 fine-tunings a seed, their evaluations).

How: every lane is a `realm-bench reproduce` process, pinned to a core, that walks the whole
plan in its order and runs the first stage that is neither finished, nor claimed by another
lane, nor waiting for an input run (a warm start, a checkpoint to evaluate) to finish, then
walks again. A lane claims a stage by making `RUNS/NAME.lane` (an atomic link), so no stage
runs twice. A stage's inputs come before it in the plan, so the earliest unfinished stage can
always run: lanes wait for each other, never in a cycle. The parent makes the world and the
reference points first, clears the claims a killed reproduction left, starts the lanes, and
stops them all when one fails; rerun, the stages resume from their checkpoints.

Every lane runs its stages with one XLA thread, so a stage's records do not depend on which
lane ran it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from realm_bench.errors import InputError
from realm_bench.stages import Stages

CLAIM_SUFFIX = ".lane"
LANES_FILE = "lanes.json"   # the lane count a reproduction folder was made in
POLL_SECONDS = 5.0
ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
# A lane's first process: pins itself to a core, asks the kernel for SIGTERM when its parent
# dies (PR_SET_PDEATHSIG = 1, kept across exec: a killed reproduction leaves no lane working
# on while a rerun clears its claims), then execs the lane.
_PIN = ("import ctypes, os, signal, sys; os.sched_setaffinity(0, {int(sys.argv[1])}); "
        "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM); "
        "os.execv(sys.argv[2], sys.argv[2:])")


def claim(path: Path) -> bool:
  """Makes the claim file `path` naming this process; False when it exists already."""
  tmp = path.with_name(f".{path.name}.{os.getpid()}")
  tmp.write_text(f"{os.getpid()}\n")
  try:
    os.link(tmp, path)   # atomic, and fails when another lane's link is there
    return True
  except FileExistsError:
    return False
  finally:
    tmp.unlink()


def check_lane_count(out: Path, lanes: int, *, write: bool = True) -> None:
  """Refuses to go on with a reproduction folder in another lane count than it was made in
  (its records would mix one-thread and two-thread sums); records the count (`lanes.json`).
  A folder with records and no such file predates lanes: it was made in one."""
  from realm_bench.io_utils import atomic_write_json  # pylint: disable=g-import-not-at-top
  path = Path(out) / LANES_FILE
  if path.exists():
    try:
      made = int(json.loads(path.read_text())["lanes"])
    except (ValueError, KeyError, TypeError) as e:
      raise InputError(f"unreadable ({e})", path=path, field="lanes") from None
  elif any(Path(out).glob("seed_*/runs/*/record.json")):
    made = 1
  else:
    made = None
  if made is not None and made != lanes:
    raise InputError(f"this reproduction was made in {made} lane(s), and {lanes} would sum in "
                     f"another order: rerun with --lanes {made}, or use another --out",
                     path=path, field="ReproduceConfig.lanes")
  if write and not path.exists():
    Path(out).mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"lanes": lanes})


def clear_claims(out: Path) -> int:
  """Removes the claims a stopped reproduction left (no lane is running); returns how many."""
  stale = list(Path(out).glob(f"seed_*/runs/*{CLAIM_SUFFIX}"))
  for path in stale:
    path.unlink()
  return len(stale)


def _inputs(bindings: Sequence[str], runs: Path) -> list[Path]:
  """The runs of this seed a stage's bindings name (WARM_START, BERT_RUN, REALM_RUN, ...)."""
  found = []
  for binding in bindings:
    value = binding.partition("=")[2].strip()
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
      path = Path(value[1:-1])
      if path.parent == runs:
        found.append(path)
  return found


class Walk:
  """One pass over the plan: whether a stage ran in it, and whether any is left."""

  def __init__(self):
    self.ran = False
    self.pending = False


class LaneStages(Stages):
  """Stages that run only when this lane may take them; otherwise the walk moves on."""

  def __init__(self, *args, walk: Walk, **kwargs):
    super().__init__(*args, **kwargs)
    self.walk = walk

  def _take(self, name: str, inputs: Sequence[Path]) -> bool:
    if self.finished(name):
      return False
    self.walk.pending = True
    if self.walk.ran or not all((p / "record.json").exists() for p in inputs):
      return False
    self.runs.mkdir(parents=True, exist_ok=True)
    if not claim(self.runs / f"{name}{CLAIM_SUFFIX}"):
      return False
    if self.finished(name):   # another lane finished it between the look and the claim
      self._release(name)
      return False
    self.walk.ran = True
    return True

  def _release(self, name: str) -> None:
    (self.runs / f"{name}{CLAIM_SUFFIX}").unlink(missing_ok=True)

  def train(self, name, gin_files, bindings, *, kind: str = "train") -> Path:
    if not self._take(name, _inputs(bindings, self.runs)):
      return self.runs / name
    try:
      return super().train(name, gin_files, bindings, kind=kind)
    finally:
      self._release(name)

  def evaluate(self, name, experiment, finetuned, split, overlays=(), *, dataset="nq",
               bindings=()) -> dict:
    if not self._take(name, [Path(finetuned)]):
      return {}
    try:
      return super().evaluate(name, experiment, finetuned, split, overlays, dataset=dataset,
                              bindings=bindings)
    finally:
      self._release(name)

  def recall(self, name, experiment, checkpoint) -> dict:
    if not self._take(name, [Path(checkpoint)]):
      return {}
    try:
      return super().recall(name, experiment, checkpoint)
    finally:
      self._release(name)


def work(walk_once: Callable[[Walk], None]) -> None:
  """A lane's loop: walk the plan (`walk_once` calls the driver with LaneStages on `walk`)
  until nothing is left, waiting a little when every stage left is another lane's."""
  while True:
    walk = Walk()
    walk_once(walk)
    if not walk.pending:
      return
    if not walk.ran:
      time.sleep(POLL_SECONDS)


def run_lanes(command: Callable[[int], list[str]], lanes: int) -> None:
  """Starts `lanes` processes (`command(i)`), lane i pinned to the i-th core this process may
  use, with one XLA thread each; waits for all, and stops the rest when one fails."""
  cores = sorted(os.sched_getaffinity(0))
  running = {}
  for i in range(lanes):
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {ONE_THREAD_XLA}".strip()
    # Pinned by a fresh interpreter that then execs the lane: forking this process, which has
    # JAX's threads, to run Python in the child (preexec_fn) is not safe.
    core = cores[i % len(cores)]
    running[i] = subprocess.Popen([sys.executable, "-c", _PIN, str(core), *command(i)], env=env)
  try:
    while running:
      for i, proc in list(running.items()):
        if proc.poll() is None:
          continue
        if proc.returncode:
          raise InputError(f"lane {i} exited with status {proc.returncode} (its error is "
                           "above); rerun the same command to resume")
        del running[i]
      time.sleep(1.0)
  finally:
    for proc in running.values():
      if proc.poll() is None:
        proc.terminate()
    for proc in running.values():
      proc.wait()
