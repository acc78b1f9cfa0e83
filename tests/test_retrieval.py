"""MIPS index, refresh bookkeeping and the host-side featurisation of REALM batches."""
from __future__ import annotations

import json

import numpy as np
import pytest

from realm_bench import features
from realm_bench.errors import InputError
from realm_bench.retrieval.index import ExactIndex
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


def _corpus():
  bodies = ["Born in 1873 in Lisvar.", "Founded in 1905 by Karvel Dotan."]
  starts = [np.array([0, 5, 8, 13, 16, 22]), np.array([0, 8, 11, 16, 19, 26, 31])]
  ends = [np.array([4, 7, 12, 15, 22, 23]), np.array([7, 10, 15, 18, 25, 31, 32])]
  body_ids = [np.array([10, 11, 12, 11, 13, 4]), np.array([20, 11, 14, 21, 15, 16, 4])]
  title_ids = [np.array([30]), np.array([31, 32])]
  doc_inputs = features.pad_rows([np.concatenate([[2], t, [3], b, [3]])
                                  for t, b in zip(title_ids, body_ids)], 12)
  return features.Corpus(ids=np.array([5, 9]), titles=["Lisvar man", "Acme"], bodies=bodies,
                         doc_inputs=doc_inputs, title_ids=title_ids, body_ids=body_ids,
                         body_starts=starts, body_ends=ends)


SPECIALS = features.Specials(cls=2, sep=3, mask=1)


def test_candidates_skip_the_source_block():
  got = features.select_candidates(np.array([[5, 9, 7], [9, 5, 7]]), np.array([5, -2]), 2)
  np.testing.assert_array_equal(got, [[9, 7], [9, 5]])


def test_pretrain_batch_puts_the_null_document_first():
  examples = [{"inputs": np.array([2, 1, 1, 40, 3]), "targets": np.array([0, 12, 13, 0, 0])}]
  b = features.pretrain_batch(examples, np.array([[9, -1]]), _corpus(), SPECIALS,
                              query_len=6, max_masks=3)
  np.testing.assert_array_equal(b["mlm_positions"][0], [1, 2, 0])
  np.testing.assert_array_equal(b["mlm_weights"][0], [1, 1, 0])
  np.testing.assert_array_equal(b["cand_valid"][0], [1, 1, 0])
  np.testing.assert_array_equal(b["cand_doc_ids"][0, 0, :4], [2, 3, 3, 0])   # null doc
  # Joint input: the query, then the candidate's body (no title) and [SEP], as segment 1.
  np.testing.assert_array_equal(b["joint_ids"][0, 1, :13],
                                [2, 1, 1, 40, 3, 20, 11, 14, 21, 15, 16, 4, 3])
  assert b["joint_types"][0, 1, 4] == 0 and b["joint_types"][0, 1, 5] == 1
  assert not b["joint_ids"][0, 0, 5:].any()                                 # null: query only


def test_answer_spans_strings_and_regexes():
  corpus = _corpus()
  encode = {"1873": [12], "Karvel Dotan": [15, 16], "in 1873": [11, 12]}.__getitem__
  strings = features.AnswerMatcher(encode, regex=False)
  assert strings.spans(["1873"], corpus, 0, 10) == [(2, 2)]
  assert strings.spans(["in 1873"], corpus, 0, 10) == [(1, 2)]
  assert strings.spans(["Karvel Dotan"], corpus, 1, 1) == []                 # too long
  regexes = features.AnswerMatcher(None, regex=True)
  assert regexes.spans([r"(?:in )?19\d\d"], corpus, 1, 10) == [(1, 2)]
  assert regexes.spans(["(unclosed"], corpus, 1, 10) == []
  assert features.answer_text(corpus, 5, 2, 2) == "1873"
  assert features.answer_text(corpus, 9, 4, 5) == "Karvel Dotan"


def test_qa_batch_marks_gold_spans_inside_the_body():
  corpus = _corpus()
  matcher = features.AnswerMatcher({"1873": [12]}.__getitem__, regex=False)
  examples = [{"inputs": np.array([2, 50, 51, 3]), "answers": [b"1873"]}]
  emb = np.eye(2, 4, dtype=np.float32)
  b = features.qa_batch(examples, np.array([[9, 5, -1]]), emb, corpus, SPECIALS, matcher,
                        query_len=4, num_read=2, max_span_len=3)
  np.testing.assert_array_equal(b["retrieved_has_answer"][0], [0, 1, 0])
  np.testing.assert_array_equal(b["retrieved_valid"][0], [1, 1, 0])
  np.testing.assert_array_equal(b["retrieved_doc_emb"][0, 1], emb[0])        # block 5 = row 0
  start = b["body_start"][0, 1]
  assert start == 4 + 1 + 1                                                  # [CLS] q [SEP] t [SEP]
  assert b["gold_spans"][0, 1, start + 2, 0] == 1 and b["gold_spans"].sum() == 1
  assert b["reader_ids"][0, 1, start + 2] == 12
