"""benchmarks/malloc.py: its settings are the Makefile's, and a bad folder is refused."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import malloc  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_tunables_are_the_makefiles_long_run_setting(tmp_path):
  assert malloc.makefile_tunables() == (
      "glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184")
  assert "export GLIBC_TUNABLES ?= $(MALLOC_TUNABLES)" in (ROOT / "Makefile").read_text()
  (tmp_path / "Makefile").write_text("test:\n\ttrue\n")
  try:
    malloc.makefile_tunables(tmp_path / "Makefile")
  except SystemExit as e:
    assert "no MALLOC_TUNABLES" in str(e)
  else:
    raise AssertionError("a Makefile without MALLOC_TUNABLES was accepted")


def test_a_folder_without_bert_and_ict_runs_is_refused(tmp_path):
  proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "malloc.py"), str(tmp_path)],
                        capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert f"{tmp_path}: no runs/ict and runs/bert" in proc.stderr


def test_a_step_count_below_one_is_refused(tmp_path):
  proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "malloc.py"), str(tmp_path),
                         "--steps", "0"], capture_output=True, text=True, timeout=120, check=False)
  assert proc.returncode == 2 and "Traceback" not in proc.stderr
  assert "--steps: 0 is not a whole number of at least 1" in proc.stderr
