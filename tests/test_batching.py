"""Host-side featurisation of REALM batches, and the batch specs every model reads."""
from __future__ import annotations

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.pipelines import batching


def _corpus():
  bodies = ["Born in 1873 in Lisvar.", "Founded in 1905 by Karvel Dotan."]
  starts = [np.array([0, 5, 8, 13, 16, 22]), np.array([0, 8, 11, 16, 19, 26, 31])]
  ends = [np.array([4, 7, 12, 15, 22, 23]), np.array([7, 10, 15, 18, 25, 31, 32])]
  body_ids = [np.array([10, 11, 12, 11, 13, 4]), np.array([20, 11, 14, 21, 15, 16, 4])]
  title_ids = [np.array([30]), np.array([31, 32])]
  doc_inputs = batching.pad_rows([np.concatenate([[2], t, [3], b, [3]])
                                  for t, b in zip(title_ids, body_ids)], 12)
  return batching.Corpus(ids=np.array([5, 9]), titles=["Lisvar man", "Acme"], bodies=bodies,
                         doc_inputs=doc_inputs, title_ids=title_ids, body_ids=body_ids,
                         body_starts=starts, body_ends=ends)


SPECIALS = batching.Specials(cls=2, sep=3, mask=1)


def test_candidates_skip_the_source_block():
  got = batching.select_candidates(np.array([[5, 9, 7], [9, 5, 7]]), np.array([5, -2]), 2)
  np.testing.assert_array_equal(got, [[9, 7], [9, 5]])


def test_pretrain_batch_puts_the_null_document_first():
  examples = [{"inputs": np.array([2, 1, 1, 40, 3]), "targets": np.array([0, 12, 13, 0, 0])}]
  b = batching.pretrain_batch(examples, np.array([[9, -1]]), _corpus(), SPECIALS,
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
  strings = batching.AnswerMatcher(encode, regex=False)
  assert strings.spans(["1873"], corpus, 0, 10) == [(2, 2)]
  assert strings.spans(["in 1873"], corpus, 0, 10) == [(1, 2)]
  assert strings.spans(["Karvel Dotan"], corpus, 1, 1) == []                 # too long
  regexes = batching.AnswerMatcher(None, regex=True)
  assert regexes.spans([r"(?:in )?19\d\d"], corpus, 1, 10) == [(1, 2)]
  assert regexes.spans(["(unclosed"], corpus, 1, 10) == []
  assert batching.answer_text(corpus, 5, 2, 2) == "1873"
  assert batching.answer_text(corpus, 9, 4, 5) == "Karvel Dotan"


def test_qa_batch_marks_gold_spans_inside_the_body():
  corpus = _corpus()
  matcher = batching.AnswerMatcher({"1873": [12]}.__getitem__, regex=False)
  examples = [{"inputs": np.array([2, 50, 51, 3]), "answers": [b"1873"]}]
  emb = np.eye(2, 4, dtype=np.float32)
  b = batching.qa_batch(examples, np.array([[9, 5, -1]]), emb, corpus, SPECIALS, matcher,
                        query_len=4, num_read=2, max_span_len=3)
  np.testing.assert_array_equal(b["retrieved_has_answer"][0], [0, 1, 0])
  np.testing.assert_array_equal(b["retrieved_valid"][0], [1, 1, 0])
  np.testing.assert_array_equal(b["retrieved_doc_emb"][0, 1], emb[0])        # block 5 = row 0
  start = 4 + 1 + 1                                                          # [CLS] q [SEP] t [SEP]
  body_len = b["body_len"][0, 1]
  np.testing.assert_array_equal(b["body_positions"][0, 1, :body_len],
                                np.arange(start, start + body_len))
  assert not b["body_positions"][0, 1, body_len:].any()
  assert b["gold_spans"][0, 1, 2, 0] == 1 and b["gold_spans"].sum() == 1    # body piece 2
  assert b["reader_ids"][0, 1, b["body_positions"][0, 1, 2]] == 12


def test_batches_match_their_specs():
  corpus = _corpus()
  examples = [{"inputs": np.array([2, 1, 1, 40, 3]), "targets": np.array([0, 12, 13, 0, 0])}]
  realm = batching.pretrain_batch(examples, np.array([[9, -1]]), corpus, SPECIALS,
                                  query_len=6, max_masks=3)
  sizes = batching.REALM_BATCH.check(realm)
  assert sizes == {"batch": 1, "query_len": 6, "masks": 3, "candidates": 3, "block_len": 12,
                   "joint_len": 6 + 7 + 1}
  matcher = batching.AnswerMatcher({"1873": [12]}.__getitem__, regex=False)
  qa = batching.qa_batch([{"inputs": np.array([2, 50, 3]), "answers": [b"1873"]}],
                         np.array([[9, 5]]), np.eye(2, 4, dtype=np.float32), corpus, SPECIALS,
                         matcher, query_len=4, num_read=2, max_span_len=3)
  sizes = batching.OPEN_QA_BATCH.check(qa)
  assert (sizes["reader_len"], sizes["body"]) == (4 + 2 + 7 + 2, 7)
  del qa["gold_spans"]   # optional: prediction batches have none
  batching.OPEN_QA_BATCH.check(qa)
  with pytest.raises(ValueError, match="missing"):
    batching.REALM_BATCH.check({k: v for k, v in realm.items() if k != "cand_valid"})
  with pytest.raises(ValueError, match="int32"):
    batching.REALM_BATCH.check({**realm, "joint_ids": realm["joint_ids"].astype(np.int64)})
  zeros = batching.ICT_BATCH.zeros(batch=2, query_len=5, block_len=7)
  assert zeros["query_ids"].shape == (2, 5) and zeros["doc_ids"].dtype == np.int32


def test_lengths_are_checked_not_trimmed():
  with pytest.raises(InputError, match="does not fit the sequence length 3"):
    batching.pad_rows([np.arange(4)], 3)
  np.testing.assert_array_equal(batching.pad_rows([np.arange(4)], 3, truncate=True), [[0, 1, 2]])
  corpus = _corpus()
  examples = [{"inputs": np.array([2, 1, 1, 40, 3]), "targets": np.array([0, 12, 13, 0, 0])}]
  wider = batching.pretrain_batch(examples, np.array([[9, -1]]), corpus, SPECIALS,
                                  query_len=6, max_masks=3, joint_len=20)
  assert wider["joint_ids"].shape == (1, 3, 20)
  with pytest.raises(InputError, match="shorter than the 14"):
    batching.pretrain_batch(examples, np.array([[9, -1]]), corpus, SPECIALS, query_len=6,
                            max_masks=3, joint_len=13)


def test_closed_book_batch_masks_answer_slots_and_decodes_up_to_sep():
  from realm_bench.pipelines import mlm  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks.data import SequenceLengths  # pylint: disable=g-import-not-at-top

  class Vocab:
    cls_id, sep_id, mask_id = 2, 3, 4
    encode = staticmethod({"Karvel Dotan": [15, 16]}.__getitem__)
    decode = staticmethod(lambda ids: " ".join(str(i) for i in ids))

  pipeline = mlm.ClosedBookPipeline(answer_len=4)
  pipeline.lengths, pipeline.vocabulary = SequenceLengths(query=5, block=8), Vocab()
  pipeline.specials = batching.Specials(cls=2, sep=3, mask=4)
  example = {"inputs": np.array([2, 50, 51, 3]), "answers": [b"Karvel Dotan"]}
  b = pipeline.batch([example], with_gold=True)
  batching.MLM_BATCH.check(b)
  np.testing.assert_array_equal(b["input_ids"][0], [2, 50, 51, 3, 4, 4, 4, 4, 3, 0])
  np.testing.assert_array_equal(b["mlm_positions"][0], [4, 5, 6, 7])
  np.testing.assert_array_equal(b["mlm_targets"][0], [15, 16, 3, 0])   # answer, [SEP], unused
  np.testing.assert_array_equal(b["mlm_weights"][0], [1, 1, 1, 0])
  assert pipeline.decode(np.array([15, 16, 3, 9])) == "15 16"


def test_restatement_pairs_join_two_sentences_of_one_fact_with_the_second_unmasked():
  from realm_bench.pipelines import mlm  # pylint: disable=g-import-not-at-top
  examples = [{"inputs": np.array([2, 1, 21, 3]), "targets": np.array([0, 20, 0, 0]),
               "block_id": 5},
              {"inputs": np.array([2, 30, 1, 3]), "targets": np.array([0, 0, 20, 0]),
               "block_id": 5},
              {"inputs": np.array([2, 1, 41, 3]), "targets": np.array([0, 40, 0, 0]),
               "block_id": -1}]
  pipeline = mlm.MlmPipeline(pair_restatements=True, max_masks=2)
  pipeline.restatements = mlm.restatements_of(examples)
  assert pipeline.restatements == [[1], [0], []]
  pipeline.examples, pipeline.input_len, pipeline.seed = examples, 8, 0
  pipeline.specials = SPECIALS
  b = pipeline.prepare(0, None, examples)
  batching.MLM_BATCH.check(b)
  # The partner sentence follows without its [CLS], its own mask filled in.
  np.testing.assert_array_equal(b["input_ids"][0], [2, 1, 21, 3, 30, 20, 3, 0])
  np.testing.assert_array_equal(b["input_types"][0], [0, 0, 0, 0, 1, 1, 1, 0])
  np.testing.assert_array_equal(b["mlm_positions"][0], [1, 0])
  np.testing.assert_array_equal(b["mlm_targets"][0], [20, 0])
  # A sentence with no restatement stays alone.
  np.testing.assert_array_equal(b["input_ids"][2], [2, 1, 41, 3, 0, 0, 0, 0])
  np.testing.assert_array_equal(b["input_types"][2], 0)


def _negative_pair_pipeline():
  """Two restatements of block 5 and one sentence of block 6 (restated nowhere), half the
  second segments random."""
  from realm_bench.pipelines import mlm  # pylint: disable=g-import-not-at-top
  examples = [{"inputs": np.array([2, 1, 21, 3]), "targets": np.array([0, 20, 0, 0]),
               "block_id": 5},
              {"inputs": np.array([2, 30, 31, 3]), "targets": np.array([0, 0, 0, 0]),
               "block_id": 5},
              {"inputs": np.array([2, 40, 41, 3]), "targets": np.array([0, 0, 0, 0]),
               "block_id": 6}]
  pipeline = mlm.MlmPipeline(pair_restatements=True, max_masks=2, negative_rate=0.5)
  pipeline.restatements = mlm.restatements_of(examples)
  pipeline.examples, pipeline.input_len, pipeline.specials = examples, 8, SPECIALS
  return pipeline, examples


def test_negative_pairs_take_the_second_segment_from_another_block():
  pipeline, examples = _negative_pair_pipeline()
  seconds = set()
  for step in range(20):
    pipeline.seed = step
    seconds.add(tuple(pipeline.prepare(step, None, examples[:1])["input_ids"][0, 4:6]))
  assert seconds == {(30, 31), (40, 41)}      # its restatement, or the other block's sentence


def test_negative_pairs_are_labelled_for_the_next_sentence_loss():
  pipeline, examples = _negative_pair_pipeline()
  labels = set()
  for step in range(20):
    pipeline.seed = step
    b = pipeline.prepare(step, None, examples)
    batching.MLM_BATCH.check(b)
    random_next = tuple(b["input_ids"][0, 4:6]) == (40, 41)
    assert b["next_is_random"][0] == int(random_next)
    labels.add(int(b["next_is_random"][0]))
    # The third sentence has no restatement: no second segment, so no label counts.
    np.testing.assert_array_equal(b["next_sentence_weights"], [1, 1, 0])
    assert b["next_is_random"][2] == 0
  assert labels == {0, 1}
  pipeline.negative_rate = 0.0
  assert "next_is_random" not in pipeline.prepare(0, None, examples)


def test_namesake_negatives_are_a_namesakes_statement_of_the_same_relation():
  import types  # pylint: disable=g-import-not-at-top
  from realm_bench.pipelines import mlm  # pylint: disable=g-import-not-at-top
  # Blocks 5 (Aro Bel: title ids 60 61), 6 (Ott Bel: 62 61), 7 (Dun Eck: 63 64). Word 70 is
  # "born", 71 "died"; 1 the mask.
  titles = {5: ("Aro Bel", [60, 61]), 6: ("Ott Bel", [62, 61]), 7: ("Dun Eck", [63, 64])}
  rows = sorted(titles)
  corpus = types.SimpleNamespace(row=rows.index, titles=[titles[b][0] for b in rows],
                                 title_ids=[titles[b][1] for b in rows])
  def sentence(block, ids, target):
    return {"inputs": np.array([2, *ids, 1, 3]), "block_id": block,
            "targets": np.array([0] * (len(ids) + 1) + [target, 0])}
  examples = [sentence(5, [60, 61, 70], 80), sentence(5, [61, 70], 80),    # Aro Bel born 80
              sentence(6, [62, 61, 70], 81), sentence(6, [62, 61, 71], 82),  # Ott Bel
              sentence(7, [63, 64, 70], 83)]                                  # no namesake
  near = mlm.namesake_sentences(examples, corpus)
  # Aro Bel's sentences: Ott Bel's birth sentence (shares "born" outside the names), not his
  # death one; Dun Eck has no namesake.
  assert near == [[2], [2], [0, 1], [0, 1], []]
  pipeline = mlm.MlmPipeline(pair_restatements=True, max_masks=2, namesake_negative_rate=0.5)
  pipeline.restatements, pipeline.namesakes = mlm.restatements_of(examples), near
  pipeline.examples, pipeline.input_len, pipeline.specials = examples, 12, SPECIALS
  seconds = set()
  for step in range(20):
    pipeline.seed = step
    b = pipeline.prepare(step, None, examples[:1])
    second = tuple(b["input_ids"][0, 6:10])
    seconds.add(second)
    assert b["next_is_random"][0] == int(second[0] == 62)
  # Its restatement (filled in), or Ott Bel's birth sentence (filled in).
  assert seconds == {(61, 70, 80, 3), (62, 61, 70, 81)}
  for fields, match in (({"negative_rate": 0.5, "namesake_negative_rate": 0.5}, "positive rate"),
                        ({"namesake_negative_rate": -0.1}, "positive rate"),
                        ({"namesake_negative_rate": 0.5}, "need pair_restatements")):
    with pytest.raises(InputError, match=match) as caught:
      mlm.MlmPipeline(pretrain_task="x", **fields).setup(
          model=types.SimpleNamespace(vocabulary=None), run_dir=None,
          sequence_lengths=types.SimpleNamespace(query=4))
    assert caught.value.field == "MlmPipeline.namesake_negative_rate"


def test_sentences_then_blocks_is_the_list_without_holding_it():
  from realm_bench.pipelines import base, mlm  # pylint: disable=g-import-not-at-top
  sentences = [{"inputs": np.array([2, 1, 3]), "block_id": 0}, {"inputs": np.array([2, 3])}]
  view = mlm._SentencesThenBlocks(sentences, 3)  # pylint: disable=protected-access
  listed = sentences + [{"block": row} for row in range(3)]
  assert len(view) == len(listed) == 5
  assert [view[i] for i in range(5)] == listed and view[-1] == listed[-1]
  assert view[np.int64(2)] == {"block": 0}
  with pytest.raises(IndexError):
    view[5]  # pylint: disable=pointless-statement
  # The training stream visits the same examples in the same order either way.
  a = base.example_stream(view, batch_size=2, seed=3)
  b = base.example_stream(listed, batch_size=2, seed=3)
  for _ in range(6):
    assert next(a) == next(b)


def test_bm25_reads_zero_embeddings_that_take_no_memory_per_block():
  from realm_bench.pipelines import open_qa  # pylint: disable=g-import-not-at-top
  pipeline = open_qa.OpenQAPipeline.__new__(open_qa.OpenQAPipeline)
  pipeline.corpus, pipeline.proj_dim = _corpus(), 4
  zeros = pipeline._no_embeddings()  # pylint: disable=protected-access
  assert zeros.shape == (2, 4) and zeros.strides == (0, 4) and not zeros.any()
  matcher = batching.AnswerMatcher({"1873": [12]}.__getitem__, regex=False)
  examples = [{"inputs": np.array([2, 50, 51, 3]), "answers": [b"1873"]}]
  b = batching.qa_batch(examples, np.array([[9, 5]]), zeros, pipeline.corpus, SPECIALS, matcher,
                        query_len=4, num_read=2, max_span_len=3)
  batching.OPEN_QA_BATCH.check(b)
  np.testing.assert_array_equal(b["retrieved_doc_emb"], np.zeros((1, 2, 4), np.float32))
