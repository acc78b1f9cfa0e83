"""MIPS index and the refresh: bookkeeping, the one due-rule, the hook the loop runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.retrieval.index import ExactIndex, check_corpus, load_index
from realm_bench.retrieval import refresh
from realm_bench.retrieval.refresh import RefreshConfig, SyncRefresher, latest_version

RNG = np.random.default_rng(0)


def test_exact_index_matches_brute_force_and_round_trips(tmp_path):
  emb = RNG.normal(size=(50, 8)).astype(np.float32)
  ids = np.arange(100, 150)
  index = ExactIndex(query_batch=3)
  index.build(emb, ids, manifest={"embedder_step": 7})
  queries = RNG.normal(size=(5, 8)).astype(np.float32)
  scores, got = index.search(queries, 4)
  want = np.argsort(-(queries @ emb.T), axis=1)[:, :4] + 100
  np.testing.assert_array_equal(got, want)
  np.testing.assert_allclose(scores, np.sort(queries @ emb.T, axis=1)[:, ::-1][:, :4], rtol=1e-5)
  loaded = ExactIndex.load(index.save(tmp_path / "v1"))
  assert loaded.manifest["embedder_step"] == 7 and loaded.manifest["num_blocks"] == 50
  np.testing.assert_array_equal(loaded.search(queries, 4)[1], got)
  # A corrupted embeddings file is refused, naming the file.
  np.save(tmp_path / "v1" / "embeddings.npy", emb + 1)
  with pytest.raises(InputError, match="checksum"):
    ExactIndex.load(tmp_path / "v1")


def test_sync_refresher_versions_staleness_and_pruning(tmp_path):
  docs = RNG.integers(1, 9, size=(6, 4)).astype(np.int32)
  embed = lambda params, ids: np.tile(ids[:, :1].astype(np.float32) * params, (1, 3))
  r = SyncRefresher(doc_inputs=docs, doc_ids=np.arange(6), embed_docs=embed,
                    index_root=tmp_path, config=RefreshConfig(refresh_every_steps=3, keep=1))
  refreshed = [step for step in range(8) if r.maybe_refresh(step, 1.0)]
  assert refreshed == [0, 3, 6]
  assert r.staleness(7) == 1 and r.embedder_step == 6
  assert latest_version(tmp_path).name == "v00000006"
  assert sorted(p.name for p in tmp_path.glob("v*")) == ["v00000006"]
  # A version a checkpoint refers to survives pruning until the next checkpoint.
  r.protect()
  r.refresh(9, 2.0)
  assert sorted(p.name for p in tmp_path.glob("v*")) == ["v00000006", "v00000009"]
  restored = SyncRefresher(doc_inputs=docs, doc_ids=np.arange(6), embed_docs=embed,
                           index_root=tmp_path, config=RefreshConfig())
  restored.restore("v00000006", None, 10)
  assert restored.embedder_step == 6 and restored.staleness(10) == 4


def test_refresh_rule_is_shared_by_both_modes():
  from realm_bench.retrieval.async_refresh import AsyncRefresher  # pylint: disable=g-import-not-at-top
  assert refresh.refresh_due(0, None, 5)
  assert not refresh.refresh_due(4, 0, 5) and refresh.refresh_due(5, 0, 5)
  assert SyncRefresher.due is refresh.Refresher.due is AsyncRefresher.due


def test_refresh_hook_reports_staleness_and_saves_the_version_in_use(tmp_path):
  docs = RNG.integers(1, 9, size=(6, 4)).astype(np.int32)
  embed = lambda params, ids: np.tile(ids[:, :1].astype(np.float32) * params, (1, 3))
  r = SyncRefresher(doc_inputs=docs, doc_ids=np.arange(6), embed_docs=embed,
                    index_root=tmp_path, config=RefreshConfig(refresh_every_steps=2, keep=1))
  hook = refresh.IndexRefreshHook(r)
  assert [hook.before_step(step, 1.0)["staleness"] for step in range(5)] == [0, 1, 0, 1, 0]
  state = hook.state()
  assert state == {"index_version": "v00000004", "staleness": {"count": 5, "sum": 2, "max": 1}}
  assert r.protected == "v00000004"
  summary = hook.summary()
  assert summary["num_refreshes"] == 3 and summary["staleness_mean"] == 0.4
  resumed = refresh.IndexRefreshHook(SyncRefresher(
      doc_inputs=docs, doc_ids=np.arange(6), embed_docs=embed, index_root=tmp_path,
      config=RefreshConfig(refresh_every_steps=2, keep=1)))
  resumed.restore(state, 1.0, 5)
  assert resumed.before_step(5, 1.0) == {"staleness": 1, "index_embedder_step": 4}


def _saved_index(tmp_path, rows=6, dim=4):
  index = ExactIndex()
  index.build(RNG.normal(size=(rows, dim)).astype(np.float32), np.arange(rows) + 10,
              manifest={"embedder_step": 0})
  return index.save(tmp_path / "v0")


def _edit_manifest(path, **changes):
  manifest = json.loads((path / "manifest.json").read_text())
  (path / "manifest.json").write_text(json.dumps({**manifest, **changes}))


@pytest.mark.parametrize("damage,where,message", [
    (lambda p: _edit_manifest(p, num_blocks=7), "manifest.json: field 'num_blocks'",
     "num_blocks = 7, embeddings.npy holds 6 x 4"),
    (lambda p: _edit_manifest(p, dim=5), "manifest.json: field 'dim'", "dim = 5"),
    (lambda p: _edit_manifest(p, num_blocks="6"), "field 'num_blocks'", "non-negative integer"),
    (lambda p: (p / "embeddings.npy").write_bytes((p / "embeddings.npy").read_bytes()[:150]),
     "embeddings.npy", "truncated or not a .npy file"),
    (lambda p: (p / "ids.npy").unlink(), "ids.npy", "missing from the index folder"),
    (lambda p: np.save(p / "ids.npy", np.arange(5)), "ids.npy", "expected 6 integer ids"),
    (lambda p: np.save(p / "embeddings.npy", np.zeros((6, 4), np.float64)), "embeddings.npy",
     "float32 matrix"),
    (lambda p: (p / "manifest.json").write_bytes(b'{"kind": "\xff"}'), "manifest.json",
     "not UTF-8"),
])
def test_an_index_whose_files_disagree_with_its_manifest_is_refused(tmp_path, damage, where,
                                                                     message):
  path = _saved_index(tmp_path)
  damage(path)
  with pytest.raises(InputError, match=message) as error:
    load_index(path)
  assert where in str(error.value)


def test_an_index_of_another_corpus_or_width_is_refused(tmp_path):
  index = load_index(_saved_index(tmp_path))
  check_corpus(index, np.arange(6) + 10, path=tmp_path, corpus="c", dim=4)
  with pytest.raises(InputError, match="not the corpus 'c'"):
    check_corpus(index, np.arange(7) + 10, path=tmp_path, corpus="c", dim=4)
  with pytest.raises(InputError, match="projects to 8"):
    check_corpus(index, np.arange(6) + 10, path=tmp_path, corpus="c", dim=8)
