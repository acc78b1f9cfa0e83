"""Streaming corpus embedding: shards, resuming after a crash, refusing another job's shards."""
from __future__ import annotations

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.retrieval import corpus_embedding

ROWS, LEN, BATCH, SHARD = 50, 6, 4, 8
INPUTS = np.random.default_rng(0).integers(1, 100, size=(ROWS, LEN)).astype(np.int32)
IDS = np.arange(1000, 1000 + ROWS, dtype=np.int64)
PROJ = np.random.default_rng(1).normal(size=(LEN, 3)).astype(np.float32)


def _embed(x):
  assert x.shape == (BATCH, LEN)   # a short last batch arrives padded: one compilation
  return x.astype(np.float32) @ PROJ


def _batches(skip, crash_after=None):
  for n, start in enumerate(range(skip, ROWS, BATCH)):
    if crash_after is not None and n == crash_after:
      raise KeyboardInterrupt("killed")
    yield IDS[start:start + BATCH], INPUTS[start:start + BATCH]


def _run(out, make_batches=_batches, fingerprint=None):
  return corpus_embedding.embed_to_shards(
      embed_fn=_embed, make_batches=make_batches, out_dir=out, batch_size=BATCH,
      shard_rows=SHARD, fingerprint=fingerprint or {"step": 7})


def test_shards_assemble_to_the_embeddings_of_every_row(tmp_path):
  assert _run(tmp_path / "e") == ROWS
  assert corpus_embedding.complete_shards(tmp_path / "e") == list(range(7))   # 6 x 8 + 2
  embeddings, ids = corpus_embedding.assemble(tmp_path / "e", tmp_path / "all.npy")
  assert isinstance(embeddings, np.memmap)
  np.testing.assert_allclose(embeddings, INPUTS.astype(np.float32) @ PROJ, rtol=1e-6)
  np.testing.assert_array_equal(ids, IDS)
  assert not list(tmp_path.glob(".*.tmp"))


def test_a_killed_job_resumes_where_it_stopped(tmp_path):
  with pytest.raises(KeyboardInterrupt):
    _run(tmp_path / "e", lambda skip: _batches(skip, crash_after=5))
  assert corpus_embedding.complete_shards(tmp_path / "e") == [0, 1]   # 20 rows, 2 full shards
  seen = []

  def resumed(skip):
    seen.append(skip)
    return _batches(skip)

  assert _run(tmp_path / "e", resumed) == ROWS
  assert seen == [16]
  embeddings, ids = corpus_embedding.assemble(tmp_path / "e", tmp_path / "all.npy")
  np.testing.assert_allclose(embeddings, INPUTS.astype(np.float32) @ PROJ, rtol=1e-6)
  np.testing.assert_array_equal(ids, IDS)
  assert _run(tmp_path / "e", lambda skip: pytest.fail("a finished job reran")) == ROWS


def test_shards_of_another_job_are_refused(tmp_path):
  _run(tmp_path / "e")
  with pytest.raises(InputError, match="different job") as e:
    _run(tmp_path / "e", fingerprint={"step": 8})
  assert "job.json" in str(e.value)


def test_unfinished_embeddings_cannot_be_assembled(tmp_path):
  with pytest.raises(KeyboardInterrupt):
    _run(tmp_path / "e", lambda skip: _batches(skip, crash_after=3))
  with pytest.raises(InputError, match="not finished"):
    corpus_embedding.assemble(tmp_path / "e", tmp_path / "all.npy")
