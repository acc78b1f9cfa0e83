"""Checkpoints: round trip, keep-N, refusing another model's checkpoint, atomic saves."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import jax
import numpy as np
import pytest

from realm_bench import checkpoints
from realm_bench.errors import InputError
from toy_model import make_batches, toy_trainer


def _state(hidden=16):
  return toy_trainer(hidden=hidden).init_state(jax.random.PRNGKey(0), next(make_batches(0, 0)))


def test_round_trip_and_keep_newest(tmp_path):
  state = _state()
  manager = checkpoints.CheckpointManager(tmp_path, keep=2)
  for step in (1, 2, 3):
    manager.save(step, state.replace(step=state.step + step), {"data": {"position": step}})
  manager.wait_until_finished()
  assert manager.all_steps() == [2, 3] and manager.latest_step() == 3
  restored, extra = manager.restore(target_state=state)
  assert int(restored.step) == 3 and extra == {"data": {"position": 3}}
  for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(restored.params), strict=True):
    np.testing.assert_array_equal(a, b)
    assert b.sharding == a.sharding
  assert (tmp_path / "3" / "param_shapes").exists()
  with pytest.raises(InputError, match="no checkpoint for step 1"):
    manager.restore(1, target_state=state)
  manager.close()


def test_load_params_without_a_target_model(tmp_path):
  state = _state()
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(3, state, {})
  manager.close()
  params = checkpoints.load_params(tmp_path)
  assert isinstance(params["Dense_0"]["kernel"], np.ndarray)
  for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(params), strict=True):
    np.testing.assert_array_equal(a, b)
  with pytest.raises(InputError, match="does not exist"):
    checkpoints.load_params(tmp_path / "nowhere")


def test_extra_must_be_json(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  with pytest.raises(ValueError, match="JSON"):
    manager.save(1, _state(), {"rng": np.zeros(2)})
  manager.close()


def test_refuses_checkpoint_of_a_different_model(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(5, _state(hidden=16), {})
  manager.wait_until_finished()
  target = toy_trainer(hidden=32).abstract_state(jax.random.PRNGKey(0), next(make_batches(0, 0)))
  with pytest.raises(InputError) as info:
    manager.restore(target_state=target)
  message = str(info.value)
  # Flattening order is alphabetical: Dense_0/bias is the first parameter that differs.
  assert info.value.field == "Dense_0/bias"
  assert "(16,) float32 in the checkpoint" in message and "(32,) float32 in the model" in message
  assert str(tmp_path / "5") in message
  manager.close()


def test_first_mismatch_reports_missing_parameters():
  saved = {"a": {"shape": [2], "dtype": "float32"}, "b": {"shape": [3], "dtype": "float32"}}
  assert checkpoints.first_mismatch(saved, dict(saved)) is None
  assert checkpoints.first_mismatch(saved, {"a": saved["a"]}) == "b"
  assert checkpoints.first_mismatch(saved, {**saved, "c": saved["a"]}) == "c"
  assert checkpoints.first_mismatch(saved, {"a": {"shape": [2], "dtype": "bfloat16"},
                                            "b": saved["b"]}) == "a"


def test_leftover_of_an_interrupted_save_is_never_picked_up(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(2, _state(), {})
  manager.close()
  # What a save killed before its final rename leaves behind: a complete-looking step folder
  # under orbax's temporary name.
  leftover = tmp_path / "4.orbax-checkpoint-tmp-1234567"
  shutil.copytree(tmp_path / "2", leftover)
  watcher = checkpoints.CheckpointManager(tmp_path, read_only=True)
  assert watcher.latest_step() == 2
  assert leftover.exists()  # a watcher must not delete what may be a save in progress
  with pytest.raises(RuntimeError, match="read-only"):
    watcher.save(3, _state(), {})
  manager = checkpoints.CheckpointManager(tmp_path)
  assert manager.latest_step() == 2
  assert not leftover.exists()  # a writer removes it when it opens the folder
  manager.close()


# Kills a save at its worst moment: every file written, the final rename not yet done.
_HANGING_SAVE = """
import sys, time
sys.path.insert(0, {tests!r})
import jax
from orbax.checkpoint._src.path import atomicity
from realm_bench import checkpoints
from toy_model import make_batches, toy_trainer
state = toy_trainer().init_state(jax.random.PRNGKey(0), next(make_batches(0, 0)))
manager = checkpoints.CheckpointManager({directory!r}, async_save=False)
manager.save(1, state, {{}})
async def hang(self):
  print("HALF", flush=True)
  time.sleep(600)
atomicity.AtomicRenameTemporaryPath.finalize = hang
manager.save(2, state, {{}})
"""


def test_save_killed_midway_leaves_no_usable_step(tmp_path):
  tests = os.path.dirname(os.path.abspath(__file__))
  proc = subprocess.Popen(
      [sys.executable, "-c", _HANGING_SAVE.format(tests=tests, directory=str(tmp_path))],
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), stdout=subprocess.PIPE,
      stderr=subprocess.PIPE)
  try:
    line = proc.stdout.readline().decode()
    assert line.strip() == "HALF", proc.stderr.read().decode()[-2000:]
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
  names = sorted(p.name for p in tmp_path.iterdir())
  assert "1" in names and "2" not in names
  assert any(name.startswith("2.") for name in names), names  # the half-written save
  manager = checkpoints.CheckpointManager(tmp_path)
  assert manager.latest_step() == 1
  manager.close()


def _biggest_state_file(step_dir):
  return max((p for p in (step_dir / "state").rglob("*") if p.is_file()),
             key=lambda p: p.stat().st_size)


def _truncate(path):
  path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])


def _two_steps(tmp_path):
  state = _state()
  manager = checkpoints.CheckpointManager(tmp_path, keep=3)
  for step in (2, 4):
    manager.save(step, state.replace(step=state.step + step), {"data": {"position": step}})
  manager.close()
  return state


@pytest.mark.parametrize("listed", [True, False])
def test_a_truncated_file_in_the_newest_step_is_named_and_the_intact_one_offered(
    tmp_path, listed):
  state = _two_steps(tmp_path)
  assert (tmp_path / "4" / checkpoints.FILES).exists()   # listed once orbax had finalised it
  victim = _biggest_state_file(tmp_path / "4")
  _truncate(victim)
  if not listed:   # a checkpoint of an older version, or killed before its list: orbax's error
    for step in (2, 4):
      (tmp_path / str(step) / checkpoints.FILES).unlink()
  manager = checkpoints.CheckpointManager(tmp_path)
  with pytest.raises(InputError) as error:
    manager.restore(target_state=state)
  message = str(error.value)
  assert "checkpoint of step 4" in message and "the newest intact checkpoint is step 2" in message
  assert "fall_back_to_intact_checkpoint=True" in message
  if listed:
    assert str(victim) in message and "truncated" in message
  else:
    assert str(tmp_path / "4" / "state") in message and "could not be read" in message
  with pytest.raises(InputError, match="step 4 is damaged|step 4 could not be read"):
    checkpoints.load_params(tmp_path)   # a warm start names it too
  manager.close()
  fallback = checkpoints.CheckpointManager(tmp_path, fall_back_to_intact_checkpoint=True)
  restored, extra = fallback.restore(target_state=state)
  assert int(restored.step) == 2 and extra == {"data": {"position": 2}}
  assert fallback.all_steps() == [2] and (tmp_path / "4.damaged").is_dir()
  fallback.save(4, restored, {"data": {"position": 4}})   # training goes on over step 4 again
  fallback.close()
  assert checkpoints.CheckpointManager(tmp_path, read_only=True).all_steps() == [2, 4]


def test_a_damaged_only_checkpoint_says_there_is_no_intact_one(tmp_path):
  state = _state()
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(1, state, {})
  manager.close()
  _truncate(_biggest_state_file(tmp_path / "1"))
  with pytest.raises(InputError, match="no older intact checkpoint"):
    checkpoints.CheckpointManager(tmp_path, fall_back_to_intact_checkpoint=True).restore(
        target_state=state)


@pytest.mark.parametrize("content,message", [
    (b'{"Dense_0/kernel": {"shape": [4, 16], "dty', "could not be read"),
    (b'{"Dense_0/kernel": {"shape": "4x16", "dtype": "float32"}}', "field 'Dense_0/kernel'"),
    (b'{"Dense_0/kernel": {"shape": [4, 16], "dtype": "float99"}}', "field 'Dense_0/kernel'"),
    (b'[]', "non-empty JSON object"),
])
def test_a_corrupt_param_shapes_file_is_named(tmp_path, content, message):
  state = _state()
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(1, state, {})
  manager.close()
  (tmp_path / "1" / checkpoints.FILES).unlink()   # corrupt, not truncated: the list can't tell
  (tmp_path / "1" / "param_shapes" / "metadata").write_bytes(content)
  for load in (lambda: checkpoints.load_params(tmp_path),
               lambda: checkpoints.CheckpointManager(tmp_path).restore(target_state=state)):
    with pytest.raises(InputError, match=message) as error:
      load()
    assert "param_shapes/metadata" in str(error.value)
