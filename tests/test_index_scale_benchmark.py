"""benchmarks/index_scale.py on a few thousand rows, uniform and clustered (seconds)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "index_scale.py"


@pytest.mark.parametrize("flags,kind", [
    ((), "N(0, I)"),
    (("--rows_per_cluster", "50", "--spread", "0.5"), "clustered (50 per N(0, I) centre"),
])
def test_small_run_reports_recall(tmp_path, flags, kind):
  proc = subprocess.run(
      [sys.executable, str(SCRIPT), "--rows", "3000", "--queries", "200", "--min_seconds",
       "0.05", "--work_dir", str(tmp_path), *flags],
      capture_output=True, text=True, timeout=300, check=False,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f"3,000 x 128 float32 {kind}" in proc.stdout
  assert "| loaded index returns the same neighbours | True |" in proc.stdout
  assert "recall@10, 200 held-out queries (manifest)" in proc.stdout


def test_clustered_rows_sit_near_their_centres():
  sys.path.insert(0, str(SCRIPT.parent))
  import index_scale  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  centres = index_scale.mixture_centres(1000, 16, rows_per_cluster=100, seed=0)
  assert centres.shape == (10, 16)
  rows = index_scale.draw(500, 16, np.random.default_rng(0), centres, 0.1)
  nearest = ((rows[:, None, :] - centres[None]) ** 2).sum(-1).min(axis=1)
  assert nearest.max() < 16 * 0.1 ** 2 * 4   # within a few spreads of some centre
  assert index_scale.mixture_centres(1000, 16, rows_per_cluster=0, seed=0) is None
