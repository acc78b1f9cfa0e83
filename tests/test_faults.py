"""Injected faults on the tiny world: what a killed run, a damaged checkpoint or index, and a
mismatched run leave behind is discarded or refused with a clean message, never searched or
restored half-way and never a traceback.

One module-scoped world, vocabulary and ICT run serve every test, as in test_realm_pipeline.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import gin
import pytest

from realm_bench import cli, gin_utils
from realm_bench import train as train_lib
from realm_bench.retrieval import async_refresh, refresh

OVERLAYS = ["sizes/tiny.gin", "testing/tiny.gin"]


def _bindings(root: Path, run: str, **macros) -> list[str]:
  out = [f"WORLD_DIR = '{root / 'world'}'", f"VOCAB_PATH = '{root / 'vocab.txt'}'",
         f"RUN_DIR = '{root / run}'"]
  return out + [f"{k} = {v!r}" for k, v in macros.items()]


def _train(root, run_file, run, stop_at_step=None, extra_files=(), extra_bindings=(),
           **macros):
  gin_utils.parse_gin([run_file, *OVERLAYS, *extra_files],
                      _bindings(root, run, **macros) + list(extra_bindings))
  return gin.get_configurable(train_lib.train)(progress=False, log_every=1,
                                               stop_at_step=stop_at_step)


def _cli_args(root: Path, run_file: str, run: str, **macros) -> list[str]:
  return [f"--gin_file={run_file}", *[f"--gin_file={f}" for f in OVERLAYS],
          *[f"--gin.{b.replace(' = ', '=', 1)}" for b in _bindings(root, run, **macros)]]


def _metrics(run_dir: Path) -> list[dict]:
  return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def ict(world):
  _train(world, "runs/ict.gin", "ict", NUM_STEPS=4, extra_bindings=[
      "train_lib.train.checkpoint_every = 2", "train_lib.train.keep_checkpoints = 3"])
  return world / "ict"


def test_a_resumed_async_run_never_searches_what_the_killed_run_made_after_its_step(
    world, ict, capsys):
  macros = dict(NUM_STEPS=6, REFRESH_EVERY=2, REFRESH_MODE="async", WARM_START=str(ict))
  _train(world, "runs/pretrain.gin", "async_resume", stop_at_step=4, **macros)
  # What a run killed at step 5, after its builder had built from step 5's export but before
  # a checkpoint, leaves: a newer version that LATEST names, its export, a builder's shards.
  index_root = world / "async_resume" / "index"
  newest = refresh.latest_version(index_root)
  shutil.copytree(newest, index_root / "v00000005")
  manifest_path = index_root / "v00000005" / "manifest.json"
  manifest = json.loads(manifest_path.read_text())
  manifest_path.write_text(json.dumps({**manifest, "embedder_step": 5}))
  (index_root / "LATEST").write_text("v00000005\n")
  export_dir = world / "async_resume" / async_refresh.EMBEDDER_DIR
  shutil.copy(async_refresh.exports(export_dir)[-1][1], export_dir / "step_00000005.msgpack")
  (index_root / ".work-v00000005").mkdir()
  capsys.readouterr()
  record = _train(world, "runs/pretrain.gin", "async_resume", **macros)
  assert record.stats["resumed_from_step"] == 4
  rows = _metrics(world / "async_resume")
  assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6]
  assert all(r["index_embedder_step"] <= r["step"] - 1 and r["staleness"] >= 0 for r in rows)
  assert "resuming at step 4: discarded" in capsys.readouterr().err
  assert 5 not in [s for s, _ in async_refresh.exports(export_dir)]
  assert not (index_root / ".work-v00000005").exists()
  assert all(refresh.version_step(p) <= 4 for p in index_root.glob("v*"))


@pytest.mark.parametrize("overlay,message", [
    (None, "no frozen index here: CHECKPOINT_FROM must be a fine-tuning run"),
    ("experiments/closed_book.gin", "CHECKPOINT_FROM is not a run of this model"),
])
def test_evaluate_on_an_ict_checkpoint_is_a_clean_error(world, ict, capsys, overlay, message):
  args = _cli_args(world, "runs/evaluate.gin", "eval_of_ict", CHECKPOINT_FROM=str(ict),
                   EXPERIMENT="realm", DATASET="nq")
  assert cli.main(["evaluate", *args, *([f"--gin_file={overlay}"] if overlay else [])]) == 2
  err = capsys.readouterr().err
  assert message in err and str(ict) in err and "Traceback" not in err
  assert not (world / "eval_of_ict" / "record.json").exists()


def test_a_truncated_newest_checkpoint_is_refused_then_taken_over_with_the_knob(
    world, ict, capsys):
  run = world / "ict_damaged"
  shutil.copytree(ict, run)
  (run / "record.json").unlink()
  assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["2", "4"]
  victim = max((p for p in (run / "checkpoints" / "4" / "state").rglob("*") if p.is_file()),
               key=lambda p: p.stat().st_size)
  victim.write_bytes(victim.read_bytes()[:victim.stat().st_size // 2])
  args = ["train", *_cli_args(world, "runs/ict.gin", "ict_damaged", NUM_STEPS=6),
          "--gin.train_lib.train.checkpoint_every=2"]
  capsys.readouterr()
  assert cli.main(args) == 2
  err = capsys.readouterr().err
  assert f"{victim}: checkpoint of step 4 is damaged" in err and "Traceback" not in err
  assert "the newest intact checkpoint is step 2" in err
  assert cli.main(args + ["--gin.CheckpointManager.fall_back_to_intact_checkpoint=True"]) == 0
  assert "resuming from step 2" in capsys.readouterr().err
  record = json.loads((run / "record.json").read_text())
  assert record["steps"] == 6 and record["stats"]["resumed_from_step"] == 2
  assert (run / "checkpoints" / "4.damaged").is_dir()
