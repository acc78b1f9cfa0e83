"""ScaNN behind MipsIndex: recall against exact search, the manifest, save/load, edge sizes."""
from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.retrieval import scann_index
from realm_bench.retrieval.index import ExactIndex, embeddings_checksum, exact_top_k, load_index
from realm_bench.retrieval.scann_index import ScannIndex, perturbed_queries, recall_at_k


def _clustered(rows, dim=32, clusters=50, spread=0.3, seed=0, queries=200):
  rng = np.random.default_rng(seed)
  centers = rng.standard_normal((clusters, dim), np.float32)
  draw = lambda n: (centers[rng.integers(clusters, size=n)]
                    + spread * rng.standard_normal((n, dim), np.float32))
  return draw(rows), draw(queries)


@pytest.fixture(scope="module")
def clustered_index():
  emb, queries = _clustered(5000)
  index = ScannIndex()
  index.build(emb, np.arange(5000) + 1000, manifest={"embedder_step": 3},
              held_out_queries=queries)
  return index, emb, queries


def test_recall_against_exact_and_manifest(clustered_index):
  index, emb, queries = clustered_index
  exact = ExactIndex()
  exact.build(emb, np.arange(5000) + 1000)
  _, want = exact.search(queries, 10)
  scores, got = index.search(queries, 10)
  recall = recall_at_k(got, want)
  assert recall >= 0.9
  assert index.manifest["recall@10"] == pytest.approx(recall)
  assert got.dtype == np.int64 and scores.dtype == np.float32 and got.shape == (200, 10)
  assert (np.diff(scores, axis=1) <= 1e-6).all()                 # best first
  # Scores are the exact float32 inner products of the returned rows (re-ranked).
  np.testing.assert_allclose(scores, np.einsum("qd,qkd->qk", queries, emb[got - 1000]),
                             rtol=1e-4, atol=1e-4)
  m = index.manifest
  assert m["kind"] == "scann" and m["num_blocks"] == 5000 and m["dim"] == 32
  assert m["embedder_step"] == 3 and m["checksum"] == embeddings_checksum(emb)
  assert m["recall_queries"] == 200 and m["recall_query_source"] == "held_out"
  assert m["scann"]["num_leaves"] == 71 and m["scann"]["mode"] == "tree_ah"
  assert m["index_build_seconds"] > 0
  json.dumps(m)


def test_default_recall_queries_are_perturbed_rows_and_reproducible():
  emb, _ = _clustered(2000, seed=1)
  index = ScannIndex(num_recall_queries=300, recall_query_noise=0.5, recall_seed=4)
  index.build(emb, np.arange(2000))
  queries = perturbed_queries(emb, 300, noise=0.5, seed=4)
  # Not dataset rows: every query is off every row.
  nearest = ((queries[:, None, :] - emb[None, :, :]) ** 2).sum(-1).min(axis=1)
  assert nearest.min() > 0.1
  _, exact_rows = exact_top_k(emb, queries, 10)
  assert index.manifest["recall@10"] == pytest.approx(
      recall_at_k(index.search(queries, 10)[1], exact_rows))
  assert index.manifest["recall_queries"] == 300
  assert index.manifest["recall_query_source"].startswith("perturbed_rows")


def test_save_load_round_trip_deserialises_without_rebuilding(clustered_index, tmp_path,
                                                               monkeypatch):
  index, emb, queries = clustered_index
  path = index.save(tmp_path / "v1")
  # ScaNN's float32 re-ranking rows are the embeddings file itself, not a second copy.
  assert os.path.samefile(path / "embeddings.npy", path / "scann" / "dataset.npy")

  def no_training(*args, **kwargs):
    raise AssertionError("load must deserialise the searcher, not train a new one")

  monkeypatch.setattr(scann_index.scann_ops_pybind, "builder", no_training)
  loaded = load_index(path)
  assert isinstance(loaded, ScannIndex) and loaded.manifest == index.manifest
  assert isinstance(loaded.embeddings, np.memmap)
  np.testing.assert_array_equal(loaded.embeddings, emb)
  for got, want in zip(loaded.search(queries, 10), index.search(queries, 10)):
    np.testing.assert_array_equal(got, want)
  # The kind must match the class asked for, and unknown kinds are refused by name.
  with pytest.raises(InputError, match="kind"):
    ExactIndex.load(path)
  manifest = json.loads((path / "manifest.json").read_text())
  (path / "manifest.json").write_text(json.dumps(dict(manifest, kind="faiss")))
  with pytest.raises(InputError, match="faiss") as e:
    load_index(path)
  assert e.value.field == "kind" and str(path) in str(e.value)
  (path / "manifest.json").write_text(json.dumps(manifest))
  np.save(path / "embeddings.npy", emb + 1)
  with pytest.raises(InputError, match="checksum"):
    load_index(path)


def test_memmap_is_used_in_place(tmp_path):
  emb, _ = _clustered(600, seed=2)
  np.save(tmp_path / "emb.npy", emb)
  mapped = np.load(tmp_path / "emb.npy", mmap_mode="r")
  index = ScannIndex(num_recall_queries=50)
  index.build(mapped, np.arange(600))
  assert index.embeddings is mapped
  exact = ExactIndex.load(_built_exact(emb).save(tmp_path / "exact"))
  assert isinstance(exact.embeddings, np.memmap)


def _built_exact(emb, ids=None):
  index = ExactIndex()
  index.build(emb, np.arange(emb.shape[0]) if ids is None else ids)
  return index


@pytest.mark.parametrize("rows", [50, 300])
def test_k_larger_than_corpus_and_thin_leaves(rows):
  emb, queries = _clustered(rows, dim=16, clusters=5, seed=3, queries=7)
  index = ScannIndex(leaves_to_search=1, num_recall_queries=20)
  index.build(emb, np.arange(rows) * 2)
  assert index.params.mode == ("tree_ah" if rows >= 256 else "brute_force")
  exact_scores, exact_ids = _built_exact(emb, np.arange(rows) * 2).search(queries, rows + 5)
  scores, ids = index.search(queries, rows + 5)
  # k is cut to the corpus size, like ExactIndex, and every row is a real, distinct block.
  assert ids.shape == (7, rows) and not np.isnan(scores).any()
  np.testing.assert_array_equal(np.sort(ids, axis=1), np.sort(exact_ids, axis=1))
  np.testing.assert_allclose(scores, exact_scores, rtol=1e-4, atol=1e-4)
  # One leaf holds fewer than k rows: the short queries are searched again over all leaves.
  k = rows // 2
  scores, ids = index.search(queries, k)
  assert not np.isnan(scores).any() and all(len(set(r)) == k for r in ids)
  assert index.search(queries[:0], 3)[1].shape == (0, 3)


def test_parameters_are_chosen_from_the_corpus_size():
  small = scann_index.resolve_params(300)
  assert (small.mode, small.num_leaves, small.leaves_to_search) == ("tree_ah", 17, 16)
  assert small.training_sample_size == 300 and small.reorder_num_neighbors == 100
  assert scann_index.resolve_params(100).mode == "brute_force"
  big = scann_index.resolve_params(13_353_718)
  assert (big.num_leaves, big.leaves_to_search) == (3654, 366)
  assert big.training_sample_size == 64 * 3654 and big.reorder_num_neighbors == 100
  mid = scann_index.resolve_params(1_000_000, k=50)
  assert (mid.num_leaves, mid.leaves_to_search, mid.training_sample_size,
          mid.reorder_num_neighbors) == (1000, 100, 100_000, 500)
  assert mid.training_threads >= 1 and mid.dimensions_per_block == 2
  assert mid.anisotropic_quantization_threshold == 0.2
  chosen = scann_index.resolve_params(1_000_000, num_leaves=2000, leaves_to_search=3000,
                                      reorder_num_neighbors=40, reorder_dtype="int8")
  assert (chosen.num_leaves, chosen.leaves_to_search, chosen.reorder_num_neighbors,
          chosen.reorder_dtype) == (2000, 2000, 40, "int8")
  with pytest.raises(ValueError, match="reorder_dtype"):
    scann_index.resolve_params(10, reorder_dtype="fp8")


def test_checksum_in_chunks_equals_whole_array_hash():
  emb = np.random.default_rng(5).standard_normal((103, 7)).astype(np.float32)
  whole = hashlib.sha256(emb.tobytes()).hexdigest()
  assert embeddings_checksum(emb, chunk_rows=10) == whole == embeddings_checksum(emb)
  assert embeddings_checksum(emb.astype(np.float64), chunk_rows=9) == whole


def test_exact_search_in_blocks_and_chunks_is_exact():
  rng = np.random.default_rng(6)
  emb = rng.standard_normal((1003, 16)).astype(np.float32)
  queries = rng.standard_normal((9, 16)).astype(np.float32)
  want_scores = np.sort(queries @ emb.T, axis=1)[:, ::-1][:, :5]
  want_rows = np.argsort(-(queries @ emb.T), axis=1)[:, :5]
  index = ExactIndex(top_k_block=8, query_batch=4)     # 125 blocks of 8 and a 3-row tail
  index.build(emb, np.arange(1003) + 7)
  scores, ids = index.search(queries, 5)
  np.testing.assert_array_equal(ids, want_rows + 7)
  np.testing.assert_allclose(scores, want_scores, rtol=1e-5)
  scores, rows = exact_top_k(emb, queries, 5, max_scores=9 * 40)   # 40-row chunks
  np.testing.assert_array_equal(rows, want_rows)
  np.testing.assert_allclose(scores, want_scores, rtol=1e-5)

