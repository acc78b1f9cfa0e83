"""benchmarks/accelerator.py runs on the CPU: its MIPS part in the default suite (seconds), the
whole `--small` script (~3 min on 2 shared cores) with `make test-slow`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "accelerator.py"


def _run(tmp_path, *flags):
  out = tmp_path / "acc.json"
  proc = subprocess.run([sys.executable, str(SCRIPT), "--small", "--json", str(out), *flags],
                        capture_output=True, text=True, timeout=900, check=False,
                        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout, json.loads(out.read_text())


def test_small_mips_part_runs_and_writes_json(tmp_path):
  stdout, result = _run(tmp_path, "--skip", "step,embed,refresh")
  assert "| exact MIPS | 50,000 x 128" in stdout
  assert result["mips"]["rows"] == 50_000 and result["mips"]["queries_per_s"] > 0
  assert set(result["peak_tflops"]) == {"fp32", "bf16", "bf16out"}


def test_unknown_part_is_refused():
  proc = subprocess.run([sys.executable, str(SCRIPT), "--skip", "mipss"], capture_output=True,
                        text=True, timeout=120, check=False)
  assert proc.returncode == 2 and "--skip: unknown parts ['mipss']" in proc.stderr


@pytest.mark.slow
def test_whole_small_script_runs(tmp_path):
  stdout, result = _run(tmp_path)
  for part in ("pre-training step, fp32", "pre-training step, bf16", "corpus embedding",
               "exact MIPS", "async refresh"):
    assert f"| {part} |" in stdout
  assert result["refresh"]["refreshes"] >= 1 and len(result["step"]) == 2
