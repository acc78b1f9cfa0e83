"""Multi-process JAX: 2 local processes x 4 simulated CPU devices against 1 process x 8.

The processes are started by `realm_bench.launch_local` (a free local port as coordinator, gloo
for the CPU collectives) running tests/multihost_worker.py. Marked `multihost` and run by
`make test-multihost`: they start subprocesses that talk TCP to each other, which a sandboxed
CI runner may forbid, and take ~35 s on 2 cores. The in-process pieces (configs, shards, the
top-k merge) are tested in tests/test_distributed.py, in the default suite.

Tolerances: a 2-process run and a 1-process run of the same 8-device mesh execute the same
program except that the gradient all-reduce crosses processes through gloo, which adds the
per-device partial sums in another order; the parameters after 6 AdamW steps differ by about
one float32 ulp (measured <= 6e-8), so they are compared at rtol 1e-5 / atol 1e-6, the metrics
likewise. A 2-process run resumed from its checkpoint repeats exactly the program of an
uninterrupted 2-process run, so that comparison is bit-for-bit (parameters and metrics.jsonl).
Merged top-k ids equal single-process exact search exactly; scores within 1e-5 (the per-shard
matmul has other shapes, so XLA may block the dot products differently).
"""
from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from realm_bench import distributed, launch_local

pytestmark = pytest.mark.multihost

TESTS_DIR = Path(__file__).resolve().parent
WORKER = str(TESTS_DIR / "multihost_worker.py")


def _env(**extra) -> dict:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **extra)
  for key in (distributed.ENV_COORDINATOR, distributed.ENV_NUM_PROCESSES,
              distributed.ENV_PROCESS_ID):
    env.pop(key, None)
  return env


def _two_processes(*args) -> None:
  out = io.StringIO()
  status = launch_local.launch(command=[sys.executable, WORKER, *map(str, args)], processes=2,
                               devices_per_process=4, env=_env(), timeout=300, out=out)
  assert status == 0, out.getvalue()[-4000:]


def _one_process(*args) -> None:
  import subprocess  # pylint: disable=g-import-not-at-top
  proc = subprocess.run([sys.executable, WORKER, *map(str, args)], capture_output=True,
                        text=True, timeout=300, check=False,
                        env=_env(**distributed.cpu_device_flags(8)))
  assert proc.returncode == 0, proc.stderr[-4000:]


def _params(path) -> dict[str, np.ndarray]:
  data = np.load(path)
  return {k: data[k] for k in data.files}


def _metrics(run_dir) -> list[dict]:
  return [json.loads(line) for line in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("multihost")
  _one_process("train", root / "one", 6, root / "one.npz")
  _two_processes("train", root / "two", 6, root / "two.npz")
  return root


def test_two_processes_match_one_process_with_eight_devices(runs):
  one, two = _params(runs / "one.npz"), _params(runs / "two.npz")
  assert int(one["__processes__"]) == 1 and int(two["__processes__"]) == 2
  assert int(one["__devices__"]) == int(two["__devices__"]) == 8
  assert int(two["__step__"]) == 6
  assert set(one) == set(two)
  for name in (n for n in one if not n.startswith("__")):
    np.testing.assert_allclose(two[name], one[name], rtol=1e-5, atol=1e-6, err_msg=name)
  m1, m2 = _metrics(runs / "one"), _metrics(runs / "two")
  assert [r["step"] for r in m2] == [1, 2, 3, 4, 5, 6]
  for r1, r2 in zip(m1, m2):
    assert r1.keys() == r2.keys()
    np.testing.assert_allclose([r2[k] for k in sorted(r2)], [r1[k] for k in sorted(r1)],
                               rtol=1e-5, atol=1e-6)
  # Checkpoints were written once, by orbax's multi-process save, and listed by process 0.
  steps = sorted(int(p.name) for p in (runs / "two" / "checkpoints").iterdir()
                 if p.name.isdigit())
  assert steps == [2, 4, 6]
  assert (runs / "two" / "checkpoints" / "6" / "files.json").is_file()


def test_resumed_two_process_run_continues_exactly(runs, tmp_path):
  _two_processes("train", tmp_path / "run", 6, 3, tmp_path / "first.npz")
  assert int(_params(tmp_path / "first.npz")["__step__"]) == 3
  _two_processes("train", tmp_path / "run", 6, tmp_path / "resumed.npz")
  resumed, straight = _params(tmp_path / "resumed.npz"), _params(runs / "two.npz")
  for name in (n for n in straight if not n.startswith("__")):
    np.testing.assert_array_equal(resumed[name], straight[name], err_msg=name)
  assert (tmp_path / "run" / "metrics.jsonl").read_text() == (
      runs / "two" / "metrics.jsonl").read_text()


def test_merged_top_k_equals_single_process_exact_search(tmp_path):
  sys.path.insert(0, str(TESTS_DIR))
  import multihost_worker  # pylint: disable=g-import-not-at-top
  from realm_bench.retrieval import index  # pylint: disable=g-import-not-at-top
  _two_processes("search", tmp_path / "merged.npz")
  merged = np.load(tmp_path / "merged.npz")
  assert int(merged["processes"]) == 2
  rows, ids, queries = multihost_worker.corpus()
  scores, rows_found = index.exact_top_k(rows, queries, multihost_worker.K)
  np.testing.assert_array_equal(merged["ids"], ids[rows_found])
  np.testing.assert_allclose(merged["scores"], scores, rtol=0, atol=1e-5)


def test_corpus_embedded_in_shards_searches_like_one_process(tmp_path):
  sys.path.insert(0, str(TESTS_DIR))
  import jax  # pylint: disable=g-import-not-at-top
  import multihost_worker  # pylint: disable=g-import-not-at-top
  from realm_bench.retrieval import embed, index  # pylint: disable=g-import-not-at-top
  _two_processes("embed", tmp_path / "embedded.npz")
  merged = np.load(tmp_path / "embedded.npz")
  assert int(merged["processes"]) == 2
  assert int(merged["global_rows"]) == multihost_worker.CORPUS_ROWS
  _, ids, queries = multihost_worker.corpus()
  rows = embed.embed_in_batches(jax.jit(multihost_worker.embed_tokens), multihost_worker.tokens(),
                                batch_size=128)
  scores, rows_found = index.exact_top_k(rows, queries, multihost_worker.K)
  np.testing.assert_array_equal(merged["ids"], ids[rows_found])
  np.testing.assert_allclose(merged["scores"], scores, rtol=0, atol=1e-5)
