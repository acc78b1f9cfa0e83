"""WordPiece vocabulary: learning, python/TF agreement, offsets, errors, the vocab command."""
from __future__ import annotations

import json
import types
import unicodedata

import gin
import pytest
import seqio
import tensorflow as tf

from realm_bench import cli
from realm_bench.errors import InputError
from realm_bench.tasks import vocab as vocab_lib

SENTENCES = [
    "Ada Lovelace was born in London in 1815.",
    "Charles Babbage designed the Analytical Engine in London.",
    "Zoë Café was founded in Paris in 1901 by Éric Straße.",
    "The engine was never finished; Babbage kept designing engines.",
    "Lovelace wrote the first published algorithm for the engine.",
] * 4

TEXTS = [
    "Ada Lovelace was born in London in 1815.",
    "ZOË CAFÉ, founded by Éric Straße!",
    "Unseenword qqq xyz-123",
    "Tabs\tand\nnewlines  and   spaces",
    "",
]


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
  vocab_lib.learn_vocabulary(texts=SENTENCES, size=120, out=path)
  return vocab_lib.WordPieceVocabulary(path)


def test_learned_file_starts_with_reserved_tokens_and_is_deterministic(learned, tmp_path):
  lines = learned.path.read_text(encoding="utf-8").splitlines()
  assert lines[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  assert learned.pad_id == 0
  assert (learned.unk_id, learned.cls_id, learned.sep_id, learned.mask_id) == (1, 2, 3, 4)
  assert learned.eos_id is None
  assert learned.vocab_size == len(lines) <= 120
  again = tmp_path / "again.txt"
  vocab_lib.learn_vocabulary(texts=SENTENCES, size=120, out=again)
  assert again.read_text(encoding="utf-8") == learned.path.read_text(encoding="utf-8")


def test_handwritten_bert_vocab_greedy_longest_match(tmp_path):
  path = tmp_path / "vocab.txt"
  tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "play", "##ing", "##in", "the", "!"]
  path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
  v = vocab_lib.WordPieceVocabulary(path)
  assert v.encode("Playing THE game!") == [5, 6, 8, 1, 9]
  assert v.decode([2, 5, 6, 8, 3, 0, 0]) == "[CLS] playing the [SEP]"


def test_python_and_tf_encoding_agree(learned):
  ds = tf.data.Dataset.from_tensor_slices(TEXTS).map(learned.encode_tf)  # graph mode
  for text, graph_ids in zip(TEXTS, ds.as_numpy_iterator()):
    assert learned.encode(text) == graph_ids.tolist()
    assert graph_ids.dtype == "int32"
  batch = learned.encode_tf(tf.constant(TEXTS[:2]))
  assert batch.to_list() == [learned.encode(t) for t in TEXTS[:2]]


def test_decode_round_trip_is_lower_cased(learned):
  text = "Ada Lovelace was born in London"
  ids = learned.encode(text)
  assert learned.unk_id not in ids
  assert learned.decode(ids) == text.lower()
  assert learned.decode_tf(tf.constant(ids)).numpy().decode() == text.lower()
  padded = tf.constant([ids + [0, 0], ids[:2] + [0] * (len(ids))])
  assert [s.decode() for s in learned.decode_tf(padded).numpy()] == [
      text.lower(), "ada lovelace"]
  # Accents are stripped, as in BERT uncased.
  assert learned.decode(learned.encode("ZOË CAFÉ")) == "zoe cafe"


def _normalized(text):
  folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text).casefold())
  return "".join(c for c in folded if unicodedata.category(c) != "Mn")


def _check_offsets(v, text):
  ids, starts, ends = v.encode_with_offsets(text)
  assert ids.tolist() == v.encode(text)
  assert len(ids) == len(starts) == len(ends)
  for i, s, e in zip(ids.tolist(), starts.tolist(), ends.tolist()):
    assert 0 <= s < e <= len(text)
    if i != v.unk_id:
      assert v.tokens[i].removeprefix("##") in _normalized(text[s:e])
  return ids.tolist(), starts.tolist(), ends.tolist()


def _span_of(v, text, word):
  """The original characters covered by the wordpieces of `word` inside `text`."""
  ids, starts, ends = v.encode_with_offsets(text)
  ids, pieces = ids.tolist(), v.encode(word)
  at = next(i for i in range(len(ids)) if ids[i:i + len(pieces)] == pieces)
  return text[starts[at]:ends[at + len(pieces) - 1]]


def test_offsets_are_character_offsets_incl_non_ascii(learned):
  text = "Zoë Café was founded in Paris by Éric Straße."
  _, starts, ends = _check_offsets(learned, text)
  # Words map back to their exact original spelling (accents, ß), not the normalised one.
  assert _span_of(learned, text, "zoe") == "Zoë"
  assert _span_of(learned, text, "cafe") == "Café"
  assert _span_of(learned, text, "paris") == "Paris"
  assert _span_of(learned, text, "eric strasse") == "Éric Straße"
  assert text[starts[-1]:ends[-1]] == "."
  # A decomposed accent (e + U+0301) and a ligature still land on the right characters.
  assert _span_of(learned, "in Pe\u0301ris ok", "peris") == "Pe\u0301ris"
  assert _span_of(learned, "the \ufb01rst engine", "engine") == "engine"
  for t in TEXTS:
    _check_offsets(learned, t)


def test_offsets_in_graph_mode_match_python(learned):
  text = "Éric Straße founded Zoë Café."
  ds = tf.data.Dataset.from_tensors(text).map(learned.tokenize_with_offsets_tf)
  graph = next(ds.as_numpy_iterator())
  python = learned.encode_with_offsets(text)
  for g, p in zip(graph, python):
    assert g.tolist() == p.tolist()


@pytest.mark.parametrize("lines,message", [
    (["[UNK]", "[PAD]", "[CLS]", "[SEP]", "[MASK]"], "line 1 must be [PAD]"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]"], "[MASK]"),
    (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "a"], "repeats line 6"),
])
def test_bad_vocab_files(tmp_path, lines, message):
  path = tmp_path / "vocab.txt"
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")) as e:
    vocab_lib.WordPieceVocabulary(path)
  assert e.value.path == str(path)


def test_get_vocabulary_is_gin_bound_and_cached(learned):
  gin.clear_config()
  try:
    with pytest.raises(InputError, match="VOCAB_PATH"):
      vocab_lib.get_vocabulary()
    gin.bind_parameter("get_vocabulary.path", str(learned.path))
    v = vocab_lib.get_vocabulary()
    assert v is vocab_lib.get_vocabulary()
    lazy = vocab_lib.LazyVocabulary()
    assert lazy.resolve() is v
    assert lazy.encode("Ada") == v.encode("Ada") and lazy.cls_id == v.cls_id
    assert lazy.eos_id is None and lazy.vocab_size == v.vocab_size
    # seqio copes with a vocabulary that has no EOS.
    feature = seqio.Feature(vocabulary=lazy, add_eos=False)
    assert seqio.Vocabulary.decode(feature.vocabulary, v.encode("ada lovelace") + [0]) == \
        "ada lovelace"
  finally:
    gin.clear_config()


def test_missing_vocab_file_says_how_to_make_one(tmp_path):
  with pytest.raises(InputError, match="realm-bench vocab") as e:
    vocab_lib.get_vocabulary(path=str(tmp_path / "nope.txt"))
  assert "nope.txt" in str(e.value)


def _write_world(root):
  (root / "corpus").mkdir(parents=True)
  (root / "pretrain").mkdir()
  (root / "open_qa" / "nq").mkdir(parents=True)
  with open(root / "corpus" / "blocks.jsonl", "w", encoding="utf-8") as f:
    f.write(json.dumps({"id": 0, "title": "Quokkaland", "body": "Quokkaland borders Zebraton."})
            + "\n")
  with open(root / "pretrain" / "sentences.jsonl", "w", encoding="utf-8") as f:
    f.write(json.dumps({"text": "Zebraton was founded in 1901.", "spans": [], "block_id": -1})
            + "\n")
  with open(root / "open_qa" / "nq" / "train.jsonl", "w", encoding="utf-8") as f:
    f.write(json.dumps({"question": "what borders quokkaland?", "answer": ["Zebraton"]}) + "\n")


def test_vocab_command_from_world_and_text(tmp_path):
  _write_world(tmp_path / "world")
  out = tmp_path / "v.txt"
  args = types.SimpleNamespace(world=str(tmp_path / "world"), text=[], size=60, out=str(out))
  assert cli.vocab(args, []) == 0
  v = vocab_lib.WordPieceVocabulary(out)
  assert v.tokens[:5] == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
  for word in ("quokkaland", "zebraton", "borders"):  # corpus, sentences and questions all read
    assert v.unk_id not in v.encode(word)
  text_file = tmp_path / "t.jsonl"
  text_file.write_text(json.dumps({"text": "Wombatia"}) + "\n", encoding="utf-8")
  args = types.SimpleNamespace(world=None, text=[str(text_file)], size=40, out=str(out))
  assert cli.vocab(args, []) == 0
  assert vocab_lib.WordPieceVocabulary(out).unk_id not in \
      vocab_lib.WordPieceVocabulary(out).encode("wombatia")
  with pytest.raises(InputError, match="either --world"):
    cli.vocab(types.SimpleNamespace(world=None, text=[], size=40, out=str(out)), [])
  with pytest.raises(InputError, match="realm-bench world"):
    cli.vocab(types.SimpleNamespace(world=str(tmp_path / "none"), text=[], size=40,
                                             out=str(out)), [])


def test_matches_tensorflow_text_bert_tokenizer_uncased(learned):
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
  reference = tf_text.BertTokenizer(str(learned.path), lower_case=True, token_out_type=tf.int64)
  for text in TEXTS + SENTENCES[:5] + ["Ünïcödé ÀÉÎ straße ﬁne\u200b\u00adword"]:
    expected = reference.tokenize(tf.constant([text])).flat_values.numpy().tolist()
    assert learned.encode(text) == expected, text


@pytest.mark.parametrize("name,content", [("empty.txt", b"\n  \n"),
                                          ("empty.jsonl", b'{"text": ""}\n')])
def test_a_text_file_with_no_text_is_named(tmp_path, name, content):
  path = tmp_path / name
  path.write_bytes(content)
  with pytest.raises(InputError, match="no text to learn a vocabulary from") as e:
    vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_files([path]), size=40,
                               out=tmp_path / "v.txt")
  assert e.value.path == str(path) and not (tmp_path / "v.txt").exists()


def test_vocab_and_text_files_that_are_not_utf8_name_the_line(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\ncaf\xe9\n")
  with pytest.raises(InputError, match="not UTF-8 text") as e:
    vocab_lib.WordPieceVocabulary(vocab)
  assert (e.value.path, e.value.line) == (str(vocab), 6)
  text = tmp_path / "t.txt"
  text.write_bytes(b"fine\ncaf\xe9\n")
  with pytest.raises(InputError, match="not UTF-8 text") as e:
    list(vocab_lib.texts_from_files([text]))
  assert e.value.line == 2
