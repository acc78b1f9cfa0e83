"""Orbax checkpoints of a TrainState plus the small JSON a resumed run needs.

Each step directory holds three items written together:
  state         the TrainState arrays (step, params, opt_state), sharded as in training;
  extra         JSON: data-iterator position, hook state (e.g. index version), RNG seed;
  param_shapes  JSON: {param path: {"shape", "dtype"}}, read before any array is touched so
                that restoring into a model of a different size fails with a clear message
                naming the first parameter that differs, instead of an opaque array error.
Once orbax has finalised a step, `files.json` in it lists every file with its size, so a file
truncated later (a full disk, a copy cut short) is named before anything is read; a step that
fails to restore is refused naming its step and file, with the previous intact step offered
(or taken, with `fall_back_to_intact_checkpoint`; the damaged one is kept as `<step>.damaged`).
Orbax writes a step into `<step>.orbax-checkpoint-tmp-*` and renames it when complete, so a
killed save never produces a directory that `latest_step()` returns. Leftovers of killed saves
are deleted when a writing manager opens the folder (synchronously: orbax's own clean-up runs in
a thread that can race with interpreter exit). A process that only watches the folder (the
index builder) must open it with `read_only=True`, or it would delete the trainer's in-flight
saves as leftovers.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Mapping

import gin
import jax
import numpy as np
import orbax.checkpoint as ocp

from realm_bench import io_utils
from realm_bench.errors import InputError
from realm_bench.networks import versions
from realm_bench.train_state import TrainState

_ITEMS = ("state", "extra", "param_shapes")
FILES = "files.json"
# The file of each item a restore error is most likely about (the JSON items have one file).
_ITEM_FILES = {"extra": "extra/metadata", "param_shapes": "param_shapes/metadata",
               "state": "state/"}

# Orbax logs every save and restore at INFO through absl; training logs should stay readable.
logging.getLogger("absl").setLevel(logging.WARNING)


def param_shapes(params) -> dict[str, dict[str, Any]]:
  """{"a/b/kernel": {"shape": [..], "dtype": "float32"}} in the tree's flattening order."""
  out = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
    name = "/".join(str(getattr(k, "key", getattr(k, "name", getattr(k, "idx", k))))
                    for k in path)
    out[name] = {"shape": [int(d) for d in np.shape(leaf)], "dtype": str(np.dtype(leaf.dtype))}
  return out


def _describe(entry: dict[str, Any] | None) -> str:
  if entry is None:
    return "absent"
  return f"{tuple(entry['shape'])} {entry['dtype']}"


def first_mismatch(saved: Mapping[str, dict], target: Mapping[str, dict]) -> str | None:
  """The first parameter path (model order, then checkpoint-only paths) that differs."""
  for name in list(target) + [n for n in saved if n not in target]:
    if saved.get(name) != target.get(name):
      return name
  return None


def _abstract(tree) -> Any:
  """ShapeDtypeStructs with shardings: restore targets that place arrays like the model's."""

  def leaf(x):
    if isinstance(x, jax.ShapeDtypeStruct):
      return x
    sharding = getattr(x, "sharding", None)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

  return jax.tree.map(leaf, tree)


def write_file_list(step_dir) -> None:
  """Records every file of a finalised step with its size (written last, atomically)."""
  step_dir = Path(step_dir)
  files = {str(p.relative_to(step_dir)): p.stat().st_size
           for p in sorted(step_dir.rglob("*")) if p.is_file() and p.name != FILES}
  io_utils.atomic_write_json(step_dir / FILES, {"files": files})


def damaged_file(step_dir) -> tuple[str, str] | None:
  """(file, what is wrong) for a step whose files disagree with its `files.json`; None when
  they agree or there is no list (killed between orbax's commit and the list, or older)."""
  step_dir = Path(step_dir)
  try:
    listed = json.loads((step_dir / FILES).read_text())["files"]
    items = list(listed.items())
  except FileNotFoundError:
    return None
  except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
    return FILES, "not the file list this project writes"
  for name, size in items:
    path = step_dir / name
    if not path.is_file():
      return name, "missing"
    if path.stat().st_size != size:
      return name, f"{path.stat().st_size} bytes, {size} when it was written (truncated?)"
  return None


def _read_error(error: BaseException) -> str:
  """The most specific line of a restore error: orbax wraps TensorStore's message ("Error
  reading "params.x/0.0" ...: Requested byte range ... is not valid") in a generic one."""
  chain, seen = [], error
  while seen is not None and len(chain) < 10:
    chain.append(seen)
    seen = seen.__cause__ or seen.__context__
  best = next((e for e in reversed(chain) if type(e) is not Exception), error)
  lines = str(best).strip().splitlines()
  return f"{type(best).__name__}: {lines[0] if lines else ''}"[:400]


def _quiet_failed_reads() -> None:
  """After one TensorStore read fails, orbax's other reads of the step fail or finish later,
  on an event loop that is closed: unfinished coroutines, `Event loop is closed` and "Task
  exception was never retrieved" would print dozens of tracebacks after the clean error.
  Drop those (sys.unraisablehook, installed before each read because the first can come
  before the error itself; the asyncio logger, once a read failed); the rest is reported."""
  previous = sys.unraisablehook
  if getattr(previous, "_realm_bench_quiet", False):
    return

  def hook(unraisable):
    value = unraisable.exc_value
    if (isinstance(value, RuntimeError) and "Event loop is closed" in str(value)) or (
        isinstance(value, ImportError) and "shutting down" in str(value)) or (
        "orbax" in getattr(getattr(unraisable.object, "cr_code", None), "co_filename", "")):
      return
    previous(unraisable)

  hook._realm_bench_quiet = True   # pylint: disable=protected-access
  sys.unraisablehook = hook


@gin.configurable
class CheckpointManager:
  """Saves and restores TrainStates under `directory/<step>/`, keeping the `keep` newest.

  `fall_back_to_intact_checkpoint`: when the newest step is damaged, resume from the newest
  intact one (moving the damaged one aside) instead of refusing to start.
  """

  def __init__(self, directory, *, keep: int = 3, async_save: bool = True,
               read_only: bool = False, fall_back_to_intact_checkpoint: bool = False):
    if keep < 1:
      raise InputError(f"must be at least 1, got {keep}", field="keep")
    self.directory = Path(directory).resolve()
    self.read_only = read_only
    self.fall_back = fall_back_to_intact_checkpoint
    self._unlisted: list[int] = []
    if not read_only and jax.process_index() == 0 and self.directory.is_dir():
      for leftover in ocp.step.all_temporary_paths(self.directory):
        shutil.rmtree(leftover.get())
    options = ocp.CheckpointManagerOptions(
        max_to_keep=None if read_only else keep, create=not read_only, read_only=read_only,
        save_interval_steps=0 if read_only else 1, enable_async_checkpointing=async_save)
    self._manager = ocp.CheckpointManager(self.directory, options=options, item_names=_ITEMS)

  def save(self, step: int, state: TrainState, extra: Mapping[str, Any]) -> None:
    """Starts saving; arrays are copied off the device before this returns, so the caller
    may donate or overwrite `state` at once. `extra` must be JSON-serialisable."""
    if self.read_only:
      raise RuntimeError(f"checkpoint folder {self.directory} was opened read-only")
    try:
      io_utils.dumps(extra)
    except (TypeError, ValueError) as e:
      raise ValueError(f"checkpoint extra data is not JSON-serialisable: {e}") from None
    args = ocp.args.Composite(
        state=ocp.args.StandardSave(state.to_state_dict()),
        extra=ocp.args.JsonSave(dict(extra)),
        param_shapes=ocp.args.JsonSave(param_shapes(state.params)))
    self._manager.wait_until_finished()   # orbax's save would wait for the previous one too
    self._list_finished()
    self._manager.save(int(step), args=args)
    self._unlisted.append(int(step))

  def wait_until_finished(self) -> None:
    self._manager.wait_until_finished()
    self._list_finished()

  def _list_finished(self) -> None:
    for step in self._unlisted:
      if self.step_dir(step).is_dir() and jax.process_index() == 0:
        write_file_list(self.step_dir(step))
    self._unlisted = []

  def latest_step(self) -> int | None:
    """The newest complete checkpoint (as known to this process; see `reload`)."""
    return self._manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self._manager.all_steps())

  def reload(self) -> None:
    """Re-reads the folder, for a process watching checkpoints another process writes."""
    self._manager.reload()

  def step_dir(self, step: int) -> Path:
    return self.directory / str(step)

  def _restore_item(self, step: int, item: str, args):
    """One item of a step, any failure to read it an InputError naming the step and file."""
    damage = damaged_file(self.step_dir(step))
    if damage is not None:
      raise InputError(f"checkpoint of step {step} is damaged: {damage[1]}",
                       path=self.step_dir(step) / damage[0])
    _quiet_failed_reads()
    try:
      return self._manager.restore(step, args=ocp.args.Composite(**{item: args}))[item]
    except InputError:
      raise
    except Exception as e:  # pylint: disable=broad-except  # TensorStore, JSON, OS errors
      logging.getLogger("asyncio").setLevel(logging.CRITICAL)
      raise InputError(f"checkpoint of step {step} could not be read ({_read_error(e)})",
                       path=self.step_dir(step) / _ITEM_FILES[item]) from None

  def saved_shapes(self, step: int) -> dict[str, dict[str, Any]]:
    """The step's `param_shapes`, checked to be {path: {"shape": [int], "dtype": str}}."""
    saved = self._restore_item(step, "param_shapes", ocp.args.JsonRestore())
    where = self.step_dir(step) / _ITEM_FILES["param_shapes"]
    if not isinstance(saved, dict) or not saved:
      raise InputError("expected a non-empty JSON object of parameter shapes", path=where)
    for name, entry in saved.items():
      ok = isinstance(entry, dict) and isinstance(entry.get("shape"), list) and all(
          isinstance(d, int) and d >= 0 for d in entry["shape"])
      try:
        ok = ok and bool(np.dtype(entry["dtype"]))
      except (TypeError, KeyError):
        ok = False
      if not ok:
        raise InputError('expected {"shape": [int, ...], "dtype": str}', path=where, field=name)
    return saved

  def check_compatible(self, step: int, target_params) -> None:
    """Raises InputError naming the first parameter whose path, shape or dtype differs."""
    saved = self.saved_shapes(step)
    target = param_shapes(target_params)
    name = first_mismatch(saved, target)
    if name is not None:
      hint = versions.mismatch_hint(name, saved.get(name), target.get(name),
                                   checkpoint_names=saved, model_names=target)
      if hint is not None:
        raise InputError(f"checkpoint does not fit this model: {hint}",
                         path=self.step_dir(step), field=name)
      raise InputError(
          f"checkpoint does not fit this model (a different model config?): parameter "
          f"{name!r} is {_describe(saved.get(name))} in the checkpoint but "
          f"{_describe(target.get(name))} in the model", path=self.step_dir(step), field=name)

  def restore(self, step: int | None = None, *,
              target_state: TrainState) -> tuple[TrainState, dict[str, Any]]:
    """Restores `step` (default: latest) into the structure and shardings of `target_state`.

    `target_state` may hold arrays or ShapeDtypeStructs (e.g. `Trainer.abstract_state`).
    When the latest step (`step` None) is damaged, the error names the newest intact step; with
    `fall_back_to_intact_checkpoint` that one is restored instead. See `restored_step`.
    """
    if step is not None:
      if step not in self.all_steps():
        raise InputError(f"no checkpoint for step {step} (have {self.all_steps()})",
                         path=self.directory)
      return self._restore_step(step, target_state)
    step = self.latest_step()
    if step is None:
      raise InputError("no complete checkpoint to restore", path=self.directory)
    try:
      return self._restore_step(step, target_state)
    except InputError as damaged:
      if "does not fit this model" in damaged.reason:
        raise
      error = damaged
    for older in reversed([s for s in self.all_steps() if s < step]):
      try:
        restored = self._restore_step(older, target_state)
      except InputError:
        continue
      if not self.fall_back or self.read_only:
        raise InputError(
            f"{error.reason}; the newest intact checkpoint is step {older}: rerun with "
            "--gin.CheckpointManager.fall_back_to_intact_checkpoint=True to resume from it "
            f"(step {step} is then moved to {step}.damaged)", path=error.path, line=error.line,
            field=error.field) from None
      self._set_aside(step)
      print(f"checkpoint of step {step} is damaged ({error}); resuming from step {older}, "
            f"the damaged one is kept in {self.step_dir(step)}.damaged", file=sys.stderr)
      return restored
    raise InputError(f"{error.reason}; no older intact checkpoint (steps {self.all_steps()})",
                     path=error.path, line=error.line, field=error.field) from None

  def _restore_step(self, step: int, target_state: TrainState):
    self.check_compatible(step, target_state.params)
    state = self._restore_item(step, "state",
                               ocp.args.StandardRestore(_abstract(target_state.to_state_dict())))
    extra = self._restore_item(step, "extra", ocp.args.JsonRestore())
    if not isinstance(extra, dict):
      raise InputError("expected a JSON object", path=self.step_dir(step) / "extra/metadata")
    return target_state.from_saved(state), dict(extra)

  def _set_aside(self, step: int) -> None:
    """Renames a damaged step out of orbax's sight (a name that is not a step number)."""
    dest = Path(f"{self.step_dir(step)}.damaged")
    suffix = 1
    while dest.exists():
      dest, suffix = Path(f"{self.step_dir(step)}.damaged-{suffix}"), suffix + 1
    os.replace(self.step_dir(step), dest)
    self._manager.reload()

  def load_params(self, step: int | None = None) -> dict[str, Any]:
    """Only the parameters of `step` (default: latest), as host numpy arrays.

    For warm starts, where the new model's structure differs (the caller picks the subtrees
    it wants); the tree is rebuilt from `param_shapes`, so no target model is needed and the
    optimizer state is never read.
    """
    if step is None:
      step = self.latest_step()
      if step is None:
        raise InputError("no complete checkpoint to load parameters from", path=self.directory)
      try:
        return self._load_params(step)
      except InputError as error:
        intact = next((s for s in reversed(self.all_steps()) if s < step
                       and damaged_file(self.step_dir(s)) is None), None)
        if intact is None:
          raise
        raise InputError(f"{error.reason}; step {intact} looks intact: move the damaged step "
                         f"out of {self.directory} to use it", path=error.path, line=error.line,
                         field=error.field) from None
    return self._load_params(step)

  def _load_params(self, step: int) -> dict[str, Any]:
    saved = self.saved_shapes(step)
    host = jax.sharding.SingleDeviceSharding(jax.local_devices(backend="cpu")[0])
    params: dict[str, Any] = {}
    for name, entry in saved.items():
      *parents, leaf = name.split("/")
      node = params
      for parent in parents:
        node = node.setdefault(parent, {})
      node[leaf] = jax.ShapeDtypeStruct(tuple(entry["shape"]), np.dtype(entry["dtype"]),
                                        sharding=host)
    target = {"params": params}
    restored = self._restore_item(step, "state", ocp.args.PyTreeRestore(
        target, restore_args=ocp.checkpoint_utils.construct_restore_args(target),
        partial_restore=True))
    return jax.device_get(restored["params"])

  def close(self) -> None:
    self.wait_until_finished()
    self._manager.close()


def load_params(directory, step: int | None = None) -> dict[str, Any]:
  """The parameters of the latest (or given) checkpoint under `directory`, read-only."""
  if not Path(directory).is_dir():
    raise InputError("checkpoint folder does not exist", path=directory)
  manager = CheckpointManager(directory, read_only=True)
  try:
    return manager.load_params(step)
  finally:
    manager.close()
