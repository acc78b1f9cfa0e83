"""lanes.py: a stage runs once, after its inputs, in plan order, whichever lane takes it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from realm_bench import lanes, stages
from realm_bench.errors import InputError


def test_a_claim_is_taken_once_and_leaves_no_temporary_file(tmp_path):
  path = tmp_path / "ict.lane"
  assert lanes.claim(path) and not lanes.claim(path)
  assert [p.name for p in tmp_path.iterdir()] == ["ict.lane"]


def test_a_stopped_reproductions_claims_are_cleared(tmp_path):
  runs = tmp_path / "seed_0" / "runs"
  runs.mkdir(parents=True)
  lanes.claim(runs / "realm_finetune.lane")
  assert lanes.clear_claims(tmp_path) == 1 and not list(runs.iterdir())


def test_inputs_are_the_runs_of_this_seed_a_stage_names(tmp_path):
  runs = tmp_path / "runs"
  bindings = [f"WARM_START = '{runs / 'ict'}'", f'BERT_RUN = "{runs / "bert"}"',
              "REALM_RUN = None", "NUM_STEPS = 900", f"VOCAB_PATH = '{tmp_path / 'vocab.txt'}'"]
  assert lanes._inputs(bindings, runs) == [runs / "ict", runs / "bert"]


class _Recorded(lanes.LaneStages):
  """LaneStages whose stages write their record instead of training; `log` lists them."""
  log: list[str] = []

  def __init__(self, out, walk):
    super().__init__(out, stages.QuickstartConfig(), walk=walk)

  def _write(self, name):
    (self.runs / name).mkdir(parents=True, exist_ok=True)
    (self.runs / name / "record.json").write_text(json.dumps({}))
    self.log.append(name)


@pytest.fixture
def recorded(monkeypatch):
  _Recorded.log = []
  monkeypatch.setattr(stages.Stages, "train", lambda self, name, *a, **k: self._write(name))
  monkeypatch.setattr(stages.Stages, "recall", lambda self, name, *a, **k: self._write(name))
  return _Recorded


def _plan(s):
  """bert -> ict -> ict_recall_dev, and an evaluation of its own, in this order."""
  bert = s.train("bert", [], []) or s.runs / "bert"
  ict = s.train("ict", [], [f"BERT_RUN = '{bert}'"]) or s.runs / "ict"
  s.recall("ict_recall_dev", "ict", ict)
  s.train("closed_book_finetune", [], [])


def test_a_lane_runs_one_stage_a_walk_in_plan_order(tmp_path, recorded):
  walks = []

  def walk_once(walk):
    walks.append(walk)
    _plan(recorded(tmp_path, walk))

  lanes.work(walk_once)
  assert recorded.log == ["bert", "ict", "ict_recall_dev", "closed_book_finetune"]
  assert len(walks) == 5 and not walks[-1].pending and not list(tmp_path.rglob("*.lane"))


def test_a_lane_passes_stages_another_lane_holds_and_those_waiting_for_them(tmp_path, recorded):
  (tmp_path / "runs").mkdir()
  lanes.claim(tmp_path / "runs" / "bert.lane")   # the other lane is training BERT
  walk = lanes.Walk()
  _plan(recorded(tmp_path, walk))
  assert recorded.log == ["closed_book_finetune"] and walk.ran and walk.pending


def test_a_failed_lane_stops_the_others_and_is_named(tmp_path):
  import sys  # pylint: disable=g-import-not-at-top
  commands = {0: [sys.executable, "-c", "import time; time.sleep(60)"],
              1: [sys.executable, "-c", "raise SystemExit(3)"]}
  with pytest.raises(InputError, match="lane 1 exited with status 3"):
    lanes.run_lanes(commands.__getitem__, 2)


def test_lanes_stop_when_the_reproduction_is_killed(tmp_path):
  """A lane whose parent is killed outright (no cleanup) is stopped by the kernel, so a rerun
  that clears the claims never races a lane still working."""
  import os  # pylint: disable=g-import-not-at-top
  import signal  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  pid_file = tmp_path / "lane.pid"
  lane = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
  parent = subprocess.Popen([sys.executable, "-c", (
      "import sys; from realm_bench import lanes; "
      f"lanes.run_lanes(lambda i: [sys.executable, '-c', {lane!r}], 1)")])
  for _ in range(200):
    if pid_file.exists() and pid_file.read_text():
      break
    time.sleep(0.05)
  lane_pid = int(pid_file.read_text())
  parent.send_signal(signal.SIGKILL)
  parent.wait()
  for _ in range(100):
    try:
      os.kill(lane_pid, 0)
    except ProcessLookupError:
      return
    time.sleep(0.05)
  os.kill(lane_pid, signal.SIGKILL)
  raise AssertionError("the lane outlived its killed parent")


def test_a_folder_keeps_the_lane_count_it_was_made_in(tmp_path):
  lanes.check_lane_count(tmp_path, 2)
  assert json.loads((tmp_path / "lanes.json").read_text()) == {"lanes": 2}
  lanes.check_lane_count(tmp_path, 2)   # resuming as it was made
  with pytest.raises(InputError, match="made in 2 lane") as info:
    lanes.check_lane_count(tmp_path, 1)
  assert info.value.path == str(tmp_path / "lanes.json")
  assert info.value.field == "ReproduceConfig.lanes"


def test_a_folder_from_before_lanes_was_made_in_one(tmp_path):
  record = tmp_path / "seed_0" / "runs" / "bert" / "record.json"
  record.parent.mkdir(parents=True)
  record.write_text("{}")
  with pytest.raises(InputError, match="made in 1 lane"):
    lanes.check_lane_count(tmp_path, 2)
  lanes.check_lane_count(tmp_path, 1)
  assert json.loads((tmp_path / "lanes.json").read_text()) == {"lanes": 1}
