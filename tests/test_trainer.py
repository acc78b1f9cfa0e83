"""Training core: schedule, weight decay, loss going down, exact resume, kill -9, NaN stop."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from realm_bench import checkpoints, iteration, metrics_io, optim, trainer
from realm_bench.errors import InputError
from toy_model import SimulatedCrash, ToyModel, make_batches, run_training, toy_trainer

TESTS_DIR = Path(__file__).resolve().parent


def _params_equal(a, b) -> None:
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _restore_final(run_dir, step):
  """The params of `run_dir`'s checkpoint `step`, restored into a toy-model state."""
  batch = next(make_batches(0, 0))
  target = toy_trainer().abstract_state(jax.random.PRNGKey(0), batch)
  manager = checkpoints.CheckpointManager(Path(run_dir) / "checkpoints")
  state, extra = manager.restore(step, target_state=target)
  manager.close()
  return state, extra


def test_schedule_warms_up_then_decays_to_zero():
  schedule = optim.make_schedule(learning_rate=1e-3, warmup_steps=10, total_steps=110)
  assert float(schedule(0)) == 0.0
  assert float(schedule(5)) == pytest.approx(5e-4)
  assert float(schedule(10)) == pytest.approx(1e-3)
  assert float(schedule(60)) == pytest.approx(5e-4)
  assert float(schedule(110)) == 0.0
  assert float(schedule(500)) == 0.0


def test_schedule_rejects_warmup_longer_than_training():
  with pytest.raises(InputError, match="warmup_steps"):
    optim.make_schedule(learning_rate=1e-3, warmup_steps=20, total_steps=10)


def test_optimizer_reports_the_rate_it_applied():
  tx = optim.make_optimizer(learning_rate=1.0, warmup_steps=4, total_steps=8)
  params = {"w": jnp.ones(3)}
  state = tx.init(params)
  update = jax.jit(tx.update)
  seen = []
  for _ in range(9):
    _, state = update({"w": jnp.ones(3)}, state, params)
    seen.append(float(optim.learning_rate_of(state)))
  np.testing.assert_allclose(seen, [0, .25, .5, .75, 1, .75, .5, .25, 0], atol=1e-6)


def test_weight_decay_skips_biases_and_layer_norms():
  model = ToyModel()
  params = jax.eval_shape(model.init_params, jax.random.PRNGKey(0), next(make_batches(0, 0)))
  mask = optim.weight_decay_mask(params)
  assert mask["Dense_0"]["kernel"].value and mask["Dense_1"]["kernel"].value
  assert not mask["Dense_0"]["bias"].value
  assert not mask["LayerNorm_0"]["scale"].value and not mask["LayerNorm_0"]["bias"].value
  assert not optim.decays(["encoder", "embeddings_layer_norm", "gamma"])
  assert optim.decays(["encoder", "attention", "query", "kernel"])
  # With zero gradients only decay moves parameters: kernels shrink, the rest stays put.
  tx = optim.make_optimizer(learning_rate=1.0, warmup_steps=0, total_steps=10, weight_decay=0.1)
  plain = {"dense": {"kernel": jnp.ones(2), "bias": jnp.ones(2)},
           "LayerNorm": {"gamma": jnp.ones(2)}}
  updates, _ = jax.jit(tx.update)(jax.tree.map(jnp.zeros_like, plain), tx.init(plain), plain)
  np.testing.assert_allclose(updates["dense"]["kernel"], -0.1)
  np.testing.assert_array_equal(updates["dense"]["bias"], 0.0)
  np.testing.assert_array_equal(updates["LayerNorm"]["gamma"], 0.0)


def test_a_subtree_can_have_a_learning_rate_of_its_own():
  tx = optim.make_optimizer(learning_rate=1.0, warmup_steps=0, total_steps=10, weight_decay=0.0,
                            lr_multipliers={"retriever": 0.1, "frozen": 0.0})
  params = {"retriever": {"w": jnp.zeros(1)}, "reader": {"w": jnp.zeros(1)},
            "frozen": {"w": jnp.zeros(1)}}
  grads = jax.tree.map(lambda p: jnp.full_like(p, 0.5), params)
  updates, _ = jax.jit(tx.update)(grads, tx.init(params), params)
  np.testing.assert_allclose(updates["retriever"]["w"], 0.1 * updates["reader"]["w"], rtol=1e-6)
  np.testing.assert_array_equal(updates["frozen"]["w"], 0.0)
  with pytest.raises(InputError, match="lr_multipliers.retriever"):
    optim.make_optimizer(learning_rate=1.0, warmup_steps=0, total_steps=10,
                         lr_multipliers={"retriever": -1})


def test_adam_has_no_bias_correction_like_bert():
  tx = optim.make_optimizer(learning_rate=1.0, warmup_steps=0, total_steps=10, weight_decay=0.0,
                            max_grad_norm=1e9)
  params = {"w": jnp.zeros(1)}
  updates, _ = jax.jit(tx.update)({"w": jnp.full(1, 0.5)}, tx.init(params), params)
  # Bias-corrected Adam would give -1; BERT's uncorrected moments give -0.1 / sqrt(0.001).
  np.testing.assert_allclose(updates["w"], -0.1 / np.sqrt(0.001), rtol=1e-4)


def test_loss_decreases(tmp_path):
  run_training(tmp_path, num_steps=30, checkpoint_every=0)
  losses = [json.loads(line)["loss"] for line in open(tmp_path / "metrics.jsonl")]
  assert len(losses) == 30
  assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


def test_resumed_run_matches_uninterrupted(tmp_path):
  full = run_training(tmp_path / "full", num_steps=12, checkpoint_every=4)
  with pytest.raises(SimulatedCrash):
    run_training(tmp_path / "resumed", num_steps=12, checkpoint_every=4, crash_at=6)
  # The crashed run logged steps 5 and 6 past its last checkpoint (4); they must be replaced.
  assert json.loads(open(tmp_path / "resumed" / "metrics.jsonl").readlines()[-1])["step"] == 6
  resumed = run_training(tmp_path / "resumed", num_steps=12, checkpoint_every=4)
  _params_equal(full.state.params, resumed.state.params)
  _params_equal(full.state.opt_state, resumed.state.opt_state)
  assert (tmp_path / "full" / "metrics.jsonl").read_bytes() == (
      tmp_path / "resumed" / "metrics.jsonl").read_bytes()


_KILL_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from toy_model import run_training
run_training({run_dir!r}, num_steps=24, checkpoint_every=2, step_delay=0.15)
"""


def test_kill_9_then_rerun_matches_uninterrupted(tmp_path):
  run_dir = tmp_path / "killed"
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
  proc = subprocess.Popen(
      [sys.executable, "-c", _KILL_SCRIPT.format(tests=str(TESTS_DIR), run_dir=str(run_dir))],
      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  ckpt_dir = run_dir / "checkpoints"
  deadline = time.monotonic() + 60
  while not (ckpt_dir.is_dir() and any(p.name.isdigit() and int(p.name) >= 4
                                       for p in ckpt_dir.iterdir())):
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    assert time.monotonic() < deadline, "no checkpoint appeared"
    time.sleep(0.05)
  time.sleep(0.2)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  proc.stderr.close()
  killed_at = max(json.loads(line)["step"] for line in open(run_dir / "metrics.jsonl")
                  if line.endswith("\n"))
  assert killed_at < 24
  # Whatever the kill left, only complete checkpoints are candidates, and they restore.
  manager = checkpoints.CheckpointManager(ckpt_dir)
  latest = manager.latest_step()
  manager.close()
  assert latest is not None and latest >= 4
  assert not [p for p in ckpt_dir.iterdir() if "tmp" in p.name]
  resumed = run_training(run_dir, num_steps=24, checkpoint_every=2)
  full = run_training(tmp_path / "full", num_steps=24, checkpoint_every=2)
  _params_equal(full.state.params, resumed.state.params)
  assert (tmp_path / "full" / "metrics.jsonl").read_bytes() == (
      run_dir / "metrics.jsonl").read_bytes()


def test_nan_loss_stops_with_last_good_checkpoint(tmp_path):
  # Batch 5 holds a NaN, so update 6 diverges; checkpoints were at 2 and 4.
  with pytest.raises(trainer.TrainingDiverged, match="diverged at step 6") as info:
    run_training(tmp_path, num_steps=20, checkpoint_every=2, nan_at=5)
  assert info.value.last_good_step == 5
  manager = checkpoints.CheckpointManager(tmp_path / "checkpoints")
  assert manager.latest_step() == 5
  manager.close()
  state, extra = _restore_final(tmp_path, 5)
  assert int(state.step) == 5
  assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(state.params))
  assert extra[trainer.EXTRA_DATA] == {"seed": 0, "position": 5}
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]


class _RecordingHook(iteration.StepHook):
  """Reports a staleness-like host metric, records what it saw and saves a fixed state."""
  name = "recorder"

  def __init__(self):
    self.seen_after = []

  def before_step(self, step, params):
    del params
    return {"staleness": step % 3}

  def after_step(self, step, metrics):
    self.seen_after.append((step, metrics["loss"]))
    return False

  def state(self):
    return {"index_version": 11}


def test_hooks_progress_and_hook_state(tmp_path, monkeypatch):
  the_trainer = toy_trainer()
  batches = iteration.DeterministicIterator(make_batches, seed=3)
  state = the_trainer.init_state(jax.random.PRNGKey(0), batches.peek())
  hook = _RecordingHook()
  prepared = []

  def prepare(step, params, raw):
    del params
    prepared.append(step)
    return {**raw, iteration.HOST_METRICS_KEY: {"prepared_step": step}}

  stream = io.StringIO()
  monkeypatch.setattr(sys, "stderr", stream)
  manager = checkpoints.CheckpointManager(tmp_path / "ckpt")
  result = trainer.train_loop(
      trainer=the_trainer, state=state, batches=batches, start_step=0, num_steps=6,
      checkpoint_manager=manager, checkpoint_every=4, log_every=2,
      metrics_writer=metrics_io.MetricsWriter(tmp_path, tensorboard=False),
      prepare=prepare, hooks=[hook])
  assert result.step == 6 and [s for s, _ in hook.seen_after] == [1, 2, 3, 4, 5, 6]
  assert prepared == [0, 1, 2, 3, 4, 5]
  lines = stream.getvalue().splitlines()
  assert len(lines) == 3 and lines[-1].startswith("step 6/6")
  for part in ("loss ", "steps/s", "ETA ", "staleness 2"):
    assert part in lines[-1]
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  assert [(r["step"], r["staleness"], r["prepared_step"]) for r in rows] == [
      (2, 1, 1), (4, 0, 3), (6, 2, 5)]
  assert manager.all_steps() == [4, 6]
  fresh = iteration.DeterministicIterator(make_batches, seed=3)
  _, start, extra = trainer.restore_or_initialize(
      trainer=toy_trainer(), checkpoint_manager=manager, batches=fresh,
      rng=jax.random.PRNGKey(0), init_batch=fresh.peek())
  assert start == 6 and fresh.position == 6
  assert extra[trainer.EXTRA_HOOKS] == {"recorder": {"index_version": 11}}
  restored = []

  class _Restoring(iteration.StepHook):
    name = "recorder"

    def restore(self, state, params, step):
      restored.append((dict(state), step))

  trainer.restore_hooks([_Restoring()], extra, None, start)
  assert restored == [({"index_version": 11}, 6)]
  manager.close()


def test_stop_at_step_hook_ends_training_with_a_checkpoint(tmp_path):
  the_trainer = toy_trainer()
  batches = iteration.DeterministicIterator(make_batches, seed=3)
  state = the_trainer.init_state(jax.random.PRNGKey(0), batches.peek())
  manager = checkpoints.CheckpointManager(tmp_path / "ckpt")
  result = trainer.train_loop(
      trainer=the_trainer, state=state, batches=batches, start_step=0, num_steps=6,
      checkpoint_manager=manager, checkpoint_every=0, log_every=10,
      metrics_writer=metrics_io.MetricsWriter(tmp_path, tensorboard=False),
      hooks=[iteration.StopAtStep(2)], progress=False)
  assert result.step == 2 and manager.all_steps() == [2]
  manager.close()


def test_iterator_resumes_at_position_and_checks_seed():
  source = [{"x": np.full((2,), i)} for i in range(10)]
  it = iteration.DeterministicIterator.from_iterable(source, seed=1)
  for _ in range(4):
    next(it)
  state = it.get_state()
  other = iteration.DeterministicIterator.from_iterable(source, seed=1)
  other.set_state(state)
  assert next(other)["x"][0] == 4 == next(it)["x"][0]
  with pytest.raises(InputError, match="seed"):
    iteration.DeterministicIterator.from_iterable(source, seed=2).set_state(state)


def test_metrics_writer_truncates_on_resume_and_writes_tensorboard(tmp_path):
  writer = metrics_io.MetricsWriter(tmp_path)
  for step in (1, 2, 3):
    writer.write(step, {"loss": 1.0 / step}, volatile={"steps_per_second": 9.0})
  writer.close()
  with open(tmp_path / "metrics.jsonl", "a") as f:
    f.write('{"loss": 0.2, "st')  # a row torn by a kill
  metrics_io.MetricsWriter(tmp_path).truncate_after(2)
  rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
  assert rows == [{"loss": 1.0, "step": 1}, {"loss": 0.5, "step": 2}]
  assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_a_step_too_large_for_the_host_is_refused_with_its_estimate_before_allocating():
  from realm_bench import host_memory  # pylint: disable=g-import-not-at-top
  t = toy_trainer()
  batch = next(make_batches(0, 0))
  rng = jax.random.PRNGKey(0)
  assert host_memory.check_step_fits(trainer=t, rng=rng, batch=batch) is None   # small: skipped
  with pytest.raises(InputError) as e:
    host_memory.check_step_fits(trainer=t, rng=rng, batch=batch, min_state_bytes=0,
                                available=1, flops_per_second=1e9)
  assert e.value.field == "batch_size" and "does not fit" in str(e.value)
  said = []
  estimate = host_memory.check_step_fits(trainer=t, rng=rng, batch=batch, min_state_bytes=0,
                                         available=1 << 40, flops_per_second=1e9,
                                         say=said.append)
  assert said == [] and 0 < estimate["step_gib"] < 1 and estimate["step_tflop"] > 0
  # The compiled step still trains afterwards (the check allocated no state).
  state = t.init_state(rng, batch)
  t.train_step(state, batch)
