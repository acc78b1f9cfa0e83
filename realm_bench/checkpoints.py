"""Orbax checkpoints of a TrainState plus the small JSON a resumed run needs.

Each step directory holds three items written together:
  state         the TrainState arrays (step, params, opt_state), sharded as in training;
  extra         JSON: data-iterator position, hook state (e.g. index version), RNG seed;
  param_shapes  JSON: {param path: {"shape", "dtype"}}, read before any array is touched so
                that restoring into a model of a different size fails with a clear message
                naming the first parameter that differs, instead of an opaque array error.
Orbax writes a step into `<step>.orbax-checkpoint-tmp-*` and renames it when complete, so a
killed save never produces a directory that `latest_step()` returns. Leftovers of killed saves
are deleted when a writing manager opens the folder (synchronously: orbax's own clean-up runs in
a thread that can race with interpreter exit). A process that only watches the folder (the
index builder) must open it with `read_only=True`, or it would delete the trainer's in-flight
saves as leftovers.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any, Mapping

import gin
import jax
import numpy as np
import orbax.checkpoint as ocp

from realm_bench import io_utils
from realm_bench.errors import InputError
from realm_bench.train_state import TrainState

_ITEMS = ("state", "extra", "param_shapes")

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


@gin.configurable
class CheckpointManager:
  """Saves and restores TrainStates under `directory/<step>/`, keeping the `keep` newest."""

  def __init__(self, directory, *, keep: int = 3, async_save: bool = True,
               read_only: bool = False):
    if keep < 1:
      raise InputError(f"must be at least 1, got {keep}", field="keep")
    self.directory = Path(directory).resolve()
    self.read_only = read_only
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
    self._manager.save(int(step), args=args)

  def wait_until_finished(self) -> None:
    self._manager.wait_until_finished()

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

  def check_compatible(self, step: int, target_params) -> None:
    """Raises InputError naming the first parameter whose path, shape or dtype differs."""
    saved = self._manager.restore(step, args=ocp.args.Composite(
        param_shapes=ocp.args.JsonRestore()))["param_shapes"]
    target = param_shapes(target_params)
    name = first_mismatch(saved, target)
    if name is not None:
      raise InputError(
          f"checkpoint does not fit this model (a different model config?): parameter "
          f"{name!r} is {_describe(saved.get(name))} in the checkpoint but "
          f"{_describe(target.get(name))} in the model", path=self.step_dir(step), field=name)

  def restore(self, step: int | None = None, *,
              target_state: TrainState) -> tuple[TrainState, dict[str, Any]]:
    """Restores `step` (default: latest) into the structure and shardings of `target_state`.

    `target_state` may hold arrays or ShapeDtypeStructs (e.g. `Trainer.abstract_state`).
    """
    if step is None:
      step = self.latest_step()
      if step is None:
        raise InputError("no complete checkpoint to restore", path=self.directory)
    elif step not in self.all_steps():
      raise InputError(f"no checkpoint for step {step} (have {self.all_steps()})",
                       path=self.directory)
    self.check_compatible(step, target_state.params)
    restored = self._manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(_abstract(target_state.to_state_dict())),
        extra=ocp.args.JsonRestore()))
    return target_state.from_saved(restored["state"]), dict(restored["extra"])

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
    saved = self._manager.restore(step, args=ocp.args.Composite(
        param_shapes=ocp.args.JsonRestore()))["param_shapes"]
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
    restored = self._manager.restore(step, args=ocp.args.Composite(state=ocp.args.PyTreeRestore(
        target, restore_args=ocp.checkpoint_utils.construct_restore_args(target),
        partial_restore=True)))
    return jax.device_get(restored["state"]["params"])

  def close(self) -> None:
    self._manager.wait_until_finished()
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
