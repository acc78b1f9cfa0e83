"""benchmarks/stage_lanes.py and corpus_tokens.py: a bad folder or count is refused clearly."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _bench(script: str, *args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("script", ["stage_lanes.py", "corpus_tokens.py"])
def test_a_folder_without_a_quickstarts_runs_is_refused(script, tmp_path):
  proc = _bench(script, str(tmp_path))
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert f"{tmp_path}: no runs/ict and runs/bert" in proc.stderr


@pytest.mark.parametrize("script, flag", [("stage_lanes.py", "--steps"),
                                          ("corpus_tokens.py", "--repeats")])
def test_a_count_below_one_is_refused(script, flag, tmp_path):
  proc = _bench(script, str(tmp_path), flag, "0")
  assert proc.returncode == 2 and "Traceback" not in proc.stderr
  assert f"{flag}: 0 is not a whole number of at least 1" in proc.stderr


def test_a_quickstart_without_its_recall_record_is_named(tmp_path):
  for run in ("bert", "ict"):
    (tmp_path / "runs" / run).mkdir(parents=True)
  proc = _bench("corpus_tokens.py", str(tmp_path))
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert "ict_recall_dev/record.json: no such file" in proc.stderr
