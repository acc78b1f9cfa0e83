"""benchmarks/scann_frontier.py: its Pareto frontier, and a small run end to end (seconds)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import scann_frontier  # pylint: disable=g-import-not-at-top,wrong-import-position


def _point(recall, qps):
  return scann_frontier.Point(100, 10, 100, 0, 1.0, recall, qps=qps, exact_qps=10.0)


def test_frontier_keeps_only_undominated_points():
  points = [_point(0.90, 300), _point(0.95, 200), _point(0.94, 150), _point(0.99, 100),
            _point(0.99, 90), _point(0.80, 300)]
  kept = [(p.recall, p.qps) for p in scann_frontier.frontier(points)]
  assert kept == [(0.90, 300), (0.95, 200), (0.99, 100)]


def test_small_run_prints_frontier_and_target(tmp_path):
  proc = subprocess.run(
      [sys.executable, str(BENCH / "scann_frontier.py"), "--rows", "5000", "--queries", "256",
       "--num_leaves", "50", "--search_shares", "0.1,0.5", "--reorders", "100",
       "--chunks", "0", "--rounds", "1", "--min_seconds", "0.05"],
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), cwd=tmp_path)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Pareto frontier" in proc.stdout
  assert "| 5/50 | 100 | even |" in proc.stdout and "| 25/50 | 100 | even |" in proc.stdout
  assert ("PASS: 5,000 rows, batch 128" in proc.stdout
          or "FAIL: 5,000 rows, batch 128" in proc.stdout)


def test_bad_list_is_refused():
  proc = subprocess.run([sys.executable, str(BENCH / "scann_frontier.py"), "--num_leaves",
                         "a,b"], capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode != 0 and "--num_leaves: expected a comma list of int" in proc.stderr
