"""The memory-mapped token file every pipeline reads its blocks from: the same rows, texts and
batches as the in-memory corpus, and stale, truncated, damaged or half-written files never
read."""
from __future__ import annotations

import json

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.pipelines import base, batching, token_file
from realm_bench.tasks import vocab as vocab_lib
from realm_bench.tasks.data import SequenceLengths

FP = {"format": 1, "task": "t", "block_len": 8}
SPECIALS = batching.Specials(cls=2, sep=3, mask=4)


def _rows(n=10, seed=0):
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    title, body = rng.integers(5, 50, rng.integers(0, 3)), rng.integers(5, 50, rng.integers(1, 4))
    inputs = np.concatenate([[2], title, [3], body, [3]]).astype(np.int32)
    words = [f"w{int(x)}" for x in body]
    text = " ".join(words) + " é"   # a two-byte character: offsets are characters, not bytes
    ends = np.cumsum([len(w) + 1 for w in words]) - 1
    out.append(token_file.BlockRow(100 + 7 * i, inputs, 2 + len(title), len(body), f"T{i}é",
                                   text, ends - [len(w) for w in words], ends))
  return out


def test_rows_read_back_through_a_read_only_memmap(tmp_path):
  rows = _rows()
  token_file.write(tmp_path, iter(rows), block_len=8, fingerprint=FP, batch=3)
  corpus = token_file.open_corpus(tmp_path, FP)
  assert isinstance(corpus.doc_inputs, np.memmap) and not corpus.doc_inputs.flags.writeable
  assert corpus.doc_inputs.shape == (10, 8)
  for r, row in enumerate(rows):
    assert corpus.row(row.id) == r
    np.testing.assert_array_equal(corpus.doc_inputs[r, :len(row.inputs)], row.inputs)
    assert not corpus.doc_inputs[r, len(row.inputs):].any()
    body = row.inputs[row.body_start:row.body_start + row.body_len]
    np.testing.assert_array_equal(corpus.body(r), body)
    np.testing.assert_array_equal(corpus.body_ids[r], body)
    np.testing.assert_array_equal(corpus.title_ids[r], row.inputs[1:row.body_start - 1])
    assert (corpus.titles[r], corpus.bodies[r]) == (row.title, row.body)
    np.testing.assert_array_equal(corpus.body_starts[r], row.piece_starts)
    np.testing.assert_array_equal(corpus.body_ends[r], row.piece_ends)
  assert corpus.bodies[-1] == rows[-1].body and list(corpus.titles) == [r.title for r in rows]
  assert corpus.max_body_len == max(r.body_len for r in rows)
  assert corpus.max_title_len == max(r.body_start - 2 for r in rows)
  np.testing.assert_array_equal(corpus.rows(np.array([[107, 100]])), [[1, 0]])
  with pytest.raises(KeyError):
    corpus.row(101)
  with pytest.raises(KeyError, match="101"):
    corpus.rows(np.array([100, 101]))
  with pytest.raises(IndexError):
    corpus.bodies[len(rows)]


def test_an_empty_corpus_writes_valid_files(tmp_path):
  token_file.write(tmp_path, iter([]), block_len=8, fingerprint=FP)
  assert token_file.open_corpus(tmp_path, FP).doc_inputs.shape == (0, 8)


def test_a_truncated_file_is_named_and_ensure_rebuilds_it(tmp_path):
  token_file.write(tmp_path, iter(_rows()), block_len=8, fingerprint=FP)
  tokens = tmp_path / "tokens.npy"
  tokens.write_bytes(tokens.read_bytes()[:-40])
  with pytest.raises(InputError, match="truncated") as info:
    token_file.open_corpus(tmp_path, FP)
  assert info.value.path == str(tokens)
  corpus = token_file.ensure(tmp_path, FP, lambda: iter(_rows()), block_len=8)
  assert corpus.doc_inputs.shape == (10, 8)


def test_a_damaged_file_of_the_right_size_fails_its_checksum(tmp_path):
  token_file.write(tmp_path, iter(_rows()), block_len=8, fingerprint=FP)
  body = tmp_path / "body.npy"
  data = bytearray(body.read_bytes())
  data[-1] ^= 0xFF
  body.write_bytes(bytes(data))
  with pytest.raises(InputError, match="sha256") as info:
    token_file.open_corpus(tmp_path, FP)
  assert info.value.path == str(body)


def test_a_stale_file_is_refused_by_fingerprint_and_rebuilt_from_the_new_corpus(tmp_path):
  token_file.write(tmp_path, iter(_rows()), block_len=8, fingerprint=FP)
  newer = dict(FP, files={"blocks.jsonl": [123, 456]})
  with pytest.raises(InputError, match="another corpus") as info:
    token_file.open_corpus(tmp_path, newer)
  assert info.value.path == str(tmp_path / "manifest.json") and info.value.field == "fingerprint"
  corpus = token_file.ensure(tmp_path, newer, lambda: iter(_rows(4, seed=1)), block_len=8)
  assert corpus.doc_inputs.shape == (4, 8)
  assert json.loads((tmp_path / "manifest.json").read_text())["fingerprint"] == newer


def test_an_interrupted_write_leaves_no_file_that_opens(tmp_path):
  token_file.write(tmp_path, iter(_rows()), block_len=8, fingerprint=FP)

  def failing():
    yield from _rows(5)
    raise RuntimeError("killed")

  with pytest.raises(RuntimeError):
    token_file.write(tmp_path, failing(), block_len=8, fingerprint=FP, batch=2)
  with pytest.raises(InputError, match="no token-file manifest"):
    token_file.open_corpus(tmp_path, FP)
  assert not list(tmp_path.glob(".*.tmp"))


def test_a_block_longer_than_the_block_length_is_refused(tmp_path):
  row = _rows(1)[0]._replace(inputs=np.arange(2, 12, dtype=np.int32))
  with pytest.raises(InputError, match="more than the block length 8") as info:
    token_file.write(tmp_path, iter([row]), block_len=8, fingerprint=FP)
  assert info.value.field == "BLOCK_LEN"


def test_a_body_past_the_character_offsets_range_is_refused(tmp_path):
  row = _rows(1)[0]
  row = row._replace(piece_ends=row.piece_ends + 70_000)
  with pytest.raises(InputError, match="longer than 65535 characters") as info:
    token_file.write(tmp_path, iter([row]), block_len=8, fingerprint=FP)
  assert info.value.field == "body"


def test_the_corpus_task_gives_the_in_memory_corpus_rows_and_batches(world, tmp_path):
  from realm_bench import gin_utils  # pylint: disable=g-import-not-at-top
  gin_utils.parse_gin(["runs/pretrain.gin", "sizes/tiny.gin", "testing/tiny.gin"],
                      [f"WORLD_DIR = '{world / 'world'}'", f"VOCAB_PATH = '{world / 'vocab.txt'}'",
                       f"RUN_DIR = '{tmp_path}'", "WARM_START = None"])
  task, lengths = "realm_bench.synthetic.corpus", SequenceLengths(query=16, block=32)
  memory = base.load_corpus(task, lengths)
  mapped = token_file.load(task, lengths.block, tmp_path / "tokens")
  np.testing.assert_array_equal(mapped.ids, memory.ids)
  np.testing.assert_array_equal(mapped.doc_inputs, memory.doc_inputs)
  for r in range(len(memory.ids)):
    np.testing.assert_array_equal(mapped.body(r), memory.body_ids[r])
    for column in ("title_ids", "body_ids", "body_starts", "body_ends"):
      np.testing.assert_array_equal(getattr(mapped, column)[r], getattr(memory, column)[r])
    assert (mapped.titles[r], mapped.bodies[r]) == (memory.titles[r], memory.bodies[r])
  assert (mapped.max_body_len, mapped.max_title_len) == (memory.max_body_len,
                                                         memory.max_title_len)
  np.testing.assert_array_equal(mapped.rows(memory.ids[::-1]), memory.rows(memory.ids[::-1]))
  examples = [{"inputs": np.array([2, 9, 4, 3]), "targets": np.array([0, 0, 11, 0])}] * 2
  cands = np.stack([memory.ids[[0, 5, 3]], np.append(memory.ids[[7, 1]], -1)])
  want = batching.pretrain_batch(examples, cands, memory, SPECIALS, query_len=16, max_masks=2)
  got = batching.pretrain_batch(examples, cands, mapped, SPECIALS, query_len=16, max_masks=2)
  assert want.keys() == got.keys()
  for key in want:
    np.testing.assert_array_equal(got[key], want[key])
  # Open-QA's reader inputs and answer matching (string and regex answers), and its answers.
  qa = [{"inputs": np.array([2, 9, 3]), "answers": [memory.bodies[r].split()[-1]]}
        for r in (0, 4)]
  retrieved = np.stack([memory.ids[[0, 5, 3]], np.append(memory.ids[[4, 1]], -1)])
  embeddings = np.arange(len(memory.ids) * 2, dtype=np.float32).reshape(-1, 2)
  vocabulary = vocab_lib.WordPieceVocabulary(world / "vocab.txt")
  for regex in (False, True):
    kwargs = dict(query_len=16, num_read=2, max_span_len=4, with_gold=True)
    want = batching.qa_batch(qa, retrieved, embeddings, memory, SPECIALS, batching.AnswerMatcher(
        vocabulary.encode, regex=regex), **kwargs)
    got = batching.qa_batch(qa, retrieved, embeddings, mapped, SPECIALS, batching.AnswerMatcher(
        vocabulary.encode, regex=regex), **kwargs)
    assert want.keys() == got.keys() and want["retrieved_has_answer"].any()
    for key in want:
      np.testing.assert_array_equal(got[key], want[key])
  block, last = int(memory.ids[4]), len(memory.body_ids[4]) - 1
  assert (batching.answer_text(mapped, block, 0, last)
          == batching.answer_text(memory, block, 0, last))
  # A second load reuses the file: nothing is rewritten.
  stamp = (tmp_path / "tokens" / "tokens.npy").stat().st_mtime_ns
  token_file.load(task, lengths.block, tmp_path / "tokens")
  assert (tmp_path / "tokens" / "tokens.npy").stat().st_mtime_ns == stamp


def test_a_shared_folder_is_written_once_and_found_by_the_next_run(tmp_path):
  made = []

  def rows():
    made.append(1)
    return iter(_rows())

  first = token_file.ensure_shared(tmp_path, FP, rows, block_len=8)
  second = token_file.ensure_shared(tmp_path, FP, rows, block_len=8)
  assert len(made) == 1 and second.doc_inputs.shape == first.doc_inputs.shape == (10, 8)
  assert [p.name for p in tmp_path.iterdir()] == [token_file.shared_name(FP)]


def test_a_shared_folder_keeps_each_corpus_apart(tmp_path):
  other = dict(FP, block_len=9)
  token_file.ensure_shared(tmp_path, FP, lambda: iter(_rows()), block_len=8)
  corpus = token_file.ensure_shared(tmp_path, other, lambda: iter(_rows(4)), block_len=9)
  assert corpus.doc_inputs.shape == (4, 9)
  assert token_file.shared_name(FP) != token_file.shared_name(other)
  assert len(list(tmp_path.iterdir())) == 2


def test_a_run_that_loses_the_race_reads_the_winners_files(tmp_path, monkeypatch):
  """Two runs that start together both write; the second rename finds the first's folder."""
  winner = tmp_path / token_file.shared_name(FP)

  def rows_and_a_rival_finishing_first():
    token_file.write(winner, iter(_rows(3)), block_len=8, fingerprint=FP)
    return iter(_rows())

  corpus = token_file.ensure_shared(tmp_path, FP, rows_and_a_rival_finishing_first, block_len=8)
  assert corpus.doc_inputs.shape == (3, 8)
  assert [p.name for p in tmp_path.iterdir()] == [winner.name]   # its own copy is gone


def test_a_damaged_shared_folder_is_replaced(tmp_path):
  folder = tmp_path / token_file.shared_name(FP)
  token_file.write(folder, iter(_rows(3)), block_len=8, fingerprint=FP)
  tokens = folder / "tokens.npy"
  tokens.write_bytes(tokens.read_bytes()[:-8])
  corpus = token_file.ensure_shared(tmp_path, FP, lambda: iter(_rows()), block_len=8)
  assert corpus.doc_inputs.shape == (10, 8)
  assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_an_interrupted_shared_write_leaves_no_folder_that_opens(tmp_path):
  def failing():
    yield from _rows(5)
    raise RuntimeError("killed")

  with pytest.raises(RuntimeError):
    token_file.ensure_shared(tmp_path, FP, failing, block_len=8)
  assert not list(tmp_path.iterdir())
  assert token_file.ensure_shared(tmp_path, FP, lambda: iter(_rows()),
                                  block_len=8).doc_inputs.shape == (10, 8)


def test_runs_share_the_folder_corpus_tokens_dir_names(world, tmp_path):
  """With the macro set (the quickstart and reproduce set it) two runs open one copy, and
  neither writes its own."""
  from realm_bench import gin_utils  # pylint: disable=g-import-not-at-top
  shared = tmp_path / "shared"
  gin_utils.parse_gin(["runs/pretrain.gin", "sizes/tiny.gin", "testing/tiny.gin"],
                      [f"WORLD_DIR = '{world / 'world'}'", f"VOCAB_PATH = '{world / 'vocab.txt'}'",
                       f"RUN_DIR = '{tmp_path / 'a'}'", "WARM_START = None",
                       f"CORPUS_TOKENS_DIR = '{shared}'"])
  task = "realm_bench.synthetic.corpus"
  a = token_file.for_run(task, 32, tmp_path / "a")
  b = token_file.for_run(task, 32, tmp_path / "b")
  np.testing.assert_array_equal(a.doc_inputs, b.doc_inputs)
  assert len(list(shared.iterdir())) == 1 and not list(tmp_path.glob("[ab]/corpus_tokens"))
