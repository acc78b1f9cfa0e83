"""Uncased BERT WordPiece vocabulary for seqio, and the `realm-bench vocab` command.

REALM reads queries and blocks with BERT's uncased WordPiece tokenizer, so any BERT
`vocab.txt` works here (the released BERT-base uncased one at paper scale, a learned one for
the synthetic world). Three choices shape this module:

- One tokenizer implementation. The python side (`encode`, `encode_with_offsets`) runs the
  same TensorFlow ops eagerly that the graph side (`encode_tf`) runs inside tf.data, so the ids a
  model is trained on and the ids a test or a script computes can never disagree. The ids
  equal `tensorflow_text.BertTokenizer(vocab.txt, lower_case=True)`'s (tested).
- Character offsets. `tensorflow_text.BertTokenizer` reports byte offsets into its own
  lower-cased, accent-stripped copy of the text, which match nothing the user holds once the
  text is not ASCII. We normalise the text one character at a time (the same case folding, NFD,
  accent and control-character stripping BERT uncased does), keep how many bytes each original
  character became, and map the tokenizer's byte offsets back to character offsets in the
  original string: what salient-span masking and cutting answers out of blocks need.
- PAD must be id 0 (seqio reserves it) and BERT has no EOS, so `eos_id` is None and every
  feature using this vocabulary is declared with `add_eos=False`.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Iterable, Sequence

import gin
import numpy as np
import seqio

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_text, read_lines
from realm_bench.tasks import config
from realm_bench.tf_runtime import tf  # TensorFlow kept off the accelerators

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
# Learned vocabularies start with these, in this order, so PAD is id 0 as seqio requires.
RESERVED_TOKENS = (PAD, UNK, CLS, SEP, MASK)
SUFFIX = "##"

_HINT = ("learn one with `realm-bench vocab --world DIR --size N --out vocab.txt` or use BERT's "
         "uncased vocab.txt, then pass --gin.VOCAB_PATH=\"'vocab.txt'\" (from Python: "
         f"{config.API}(vocab_path=...))")


def _read_vocab_file(path: Path) -> list[str]:
  if not path.is_file():
    raise InputError(f"vocabulary file does not exist; {_HINT}", path=path)
  tokens, seen = [], {}
  for lineno, token in read_lines(path):
    if not token.strip():
      raise InputError("empty token (one wordpiece per line expected)", path=path, line=lineno)
    if token in seen:
      raise InputError(f"token {token!r} repeats line {seen[token]}", path=path, line=lineno)
    seen[token] = lineno
    tokens.append(token)
  if not tokens or tokens[0] != PAD:
    raise InputError(f"line 1 must be {PAD} (seqio reserves id 0 for padding)", path=path, line=1)
  missing = [t for t in RESERVED_TOKENS if t not in seen]
  if missing:
    raise InputError(f"missing special token(s) {', '.join(missing)}", path=path)
  return tokens


def _normalize_chars(text: tf.Tensor) -> tf.Tensor | tf.RaggedTensor:
  """BERT-uncased normalisation of each character of `text`: [..., num_chars] strings.

  Case folding (which includes NFKC), NFD, dropping combining marks (accents) and turning
  control/format characters into spaces is exactly what BertTokenizer(lower_case=True) does to
  the whole string; done per character, the byte length of each piece ties the normalised text
  back to the original characters.
  """
  import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top

  def normalize(chars):
    chars = tf_text.case_fold_utf8(chars)
    chars = tf_text.normalize_utf8(chars, "NFD")
    chars = tf.strings.regex_replace(chars, r"\p{Mn}", "")
    return tf.strings.regex_replace(chars, r"\p{Cc}|\p{Cf}", " ")

  chars = tf.strings.unicode_split(text, "UTF-8")
  if isinstance(chars, tf.RaggedTensor):
    return chars.with_flat_values(normalize(chars.flat_values))
  return normalize(chars)


class WordPieceVocabulary(seqio.Vocabulary):
  """Uncased WordPiece over a BERT vocab.txt; ids are line numbers (from 0)."""

  def __init__(self, path):
    super().__init__(extra_ids=0)
    self._path = Path(path)
    self._tokens = _read_vocab_file(self._path)
    self._ids = {t: i for i, t in enumerate(self._tokens)}
    self._words = None
    self._wordpieces = None
    self._vocab_tensor = None
    self._offsets_fn = None

  def __reduce__(self):
    # Pickled by path (a spawned index builder gets the model, vocabulary included): the
    # TensorFlow tables it builds lazily cannot be pickled, and are rebuilt on first use.
    return _load, (str(self._path),)

  @property
  def path(self) -> Path:
    return self._path

  @property
  def tokens(self) -> Sequence[str]:
    return tuple(self._tokens)

  def token_to_id(self, token: str) -> int:
    return self._ids.get(token, self.unk_id)

  @property
  def pad_id(self) -> int:
    return 0

  @property
  def unk_id(self) -> int:
    return self._ids[UNK]

  @property
  def cls_id(self) -> int:
    return self._ids[CLS]

  @property
  def sep_id(self) -> int:
    return self._ids[SEP]

  @property
  def mask_id(self) -> int:
    return self._ids[MASK]

  @property
  def eos_id(self) -> None:
    return None

  @property
  def bos_id(self) -> None:
    return None

  @property
  def _base_vocab_size(self) -> int:
    return len(self._tokens)

  def _ensure_tf(self):
    # Built eagerly (outside any tf.function or dataset trace) so one lookup table serves
    # every dataset and graph this vocabulary is used in. The scalar paths are traced once
    # here: every dataset map then calls the same concrete function instead of re-tracing
    # the tokenizer. BERT's two stages (the BasicTokenizer that tensorflow_text's vocabulary
    # learner also uses, then WordPiece) are run separately on flat words, which keeps the
    # graph a quarter of BertTokenizer's nested-ragged one.
    if self._words is None:
      import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top
      from tensorflow_text.python.ops import bert_tokenizer  # pylint: disable=g-import-not-at-top
      with tf.init_scope():
        table = tf.lookup.StaticVocabularyTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(self._tokens), tf.range(len(self._tokens), dtype=tf.int64)),
            num_oov_buckets=1)
        self._words = bert_tokenizer.BasicTokenizer(lower_case=False)  # we normalise
        self._wordpieces = tf_text.WordpieceTokenizer(
            table, suffix_indicator=SUFFIX, token_out_type=tf.int64, unknown_token=UNK)
        self._vocab_tensor = tf.constant(self._tokens)
        scalar = [tf.TensorSpec([], tf.string)]
        self._offsets_fn = tf.function(self._tokenize_with_offsets, input_signature=scalar,
                                       autograph=False)

  def _tokenize_with_offsets(self, text: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    pieces = _normalize_chars(text)
    char_end_byte = tf.cast(tf.cumsum(tf.strings.length(pieces, unit="BYTE")), tf.int64)
    normalized = tf.strings.reduce_join(pieces, axis=-1)
    words, word_begin, _ = self._words.tokenize_with_offsets(normalized)
    ids, begin, end = self._wordpieces.tokenize_with_offsets(words.flat_values)
    word_begin = tf.repeat(word_begin.flat_values, ids.row_lengths())
    begin, end = word_begin + begin.flat_values, word_begin + end.flat_values
    # The character holding a byte is the first one whose end lies beyond it; characters that
    # normalised to nothing (accents, zero-width marks) are skipped that way.
    start = tf.searchsorted(char_end_byte, begin, side="right")
    stop = tf.searchsorted(char_end_byte, end - 1, side="right") + 1
    return tf.cast(ids.flat_values, tf.int32), tf.cast(start, tf.int32), tf.cast(stop, tf.int32)

  def tokenize_with_offsets_tf(self, text: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Scalar string -> (ids, char_start, char_end), int32 vectors, no special tokens.

    Offsets are code-point positions in `text`: wordpiece i covers text[start[i]:end[i]]
    (in python string indexing); pieces of one expanded character (e.g. "ß" -> "ss") share it.
    """
    self._ensure_tf()
    return self._offsets_fn(tf.convert_to_tensor(text, dtype=tf.string))

  def _encode_tf(self, s: tf.Tensor) -> tf.Tensor:
    """Scalar -> int32 [n]; a batch of strings -> ragged int32 [batch, (n)]."""
    self._ensure_tf()
    s = tf.convert_to_tensor(s, dtype=tf.string)
    if s.shape.rank == 0:
      return self._offsets_fn(s)[0]
    words = self._words.tokenize(tf.strings.reduce_join(_normalize_chars(s), axis=-1))
    return tf.cast(self._wordpieces.tokenize(words).merge_dims(-2, -1), tf.int32)

  def _decode_tf(self, ids: tf.Tensor) -> tf.Tensor:
    """[..., n] ids -> [...] strings: pieces joined by spaces, `##` pieces glued, PAD dropped."""
    self._ensure_tf()
    ids = tf.convert_to_tensor(ids)
    tokens = tf.gather(self._vocab_tensor, ids)
    tokens = tf.ragged.boolean_mask(tokens, tf.not_equal(ids, self.pad_id))
    text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
    return tf.strings.regex_replace(text, " " + SUFFIX, "")

  def _encode(self, s: str) -> Sequence[int]:
    return self._encode_tf(tf.constant(s, dtype=tf.string)).numpy().tolist()

  def _decode(self, ids) -> str:
    tokens = [self._tokens[int(i)] for i in ids if int(i) != self.pad_id]
    return " ".join(tokens).replace(" " + SUFFIX, "")

  def encode_with_offsets(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Python twin of `tokenize_with_offsets_tf`: (ids, char starts, char ends) int32 arrays."""
    ids, starts, ends = self.tokenize_with_offsets_tf(tf.constant(text, dtype=tf.string))
    return ids.numpy(), starts.numpy(), ends.numpy()

  def __repr__(self):
    return f"WordPieceVocabulary(path={str(self._path)!r}, size={len(self._tokens)})"


@functools.lru_cache(maxsize=8)
def _load(path: str) -> WordPieceVocabulary:
  return WordPieceVocabulary(path)


@gin.configurable
def get_vocabulary(path=None) -> WordPieceVocabulary:
  """The vocabulary the tasks and models use (macro VOCAB_PATH, else `configure(vocab_path=...)`);
  one instance per file."""
  if path is None:
    path = config.current().vocab_path
  if path is None:
    raise InputError(f"no vocabulary configured; {_HINT}")
  return _load(str(Path(path).expanduser().resolve()))


class LazyVocabulary(seqio.Vocabulary):
  """A seqio Vocabulary that asks `get_vocabulary()` on every use.

  Tasks are registered at import, before gin has been parsed, so their Features cannot hold
  the real vocabulary; this stand-in delegates to whatever VOCAB_PATH names when a dataset is
  built or an output decoded (and follows a changed binding, as tests need).
  """

  def __init__(self):
    super().__init__(extra_ids=0)

  def resolve(self) -> WordPieceVocabulary:
    return get_vocabulary()

  def __getattr__(self, name):
    # cls_id, sep_id, mask_id, tokenize_with_offsets_tf, encode_with_offsets, tokens, ...
    if name.startswith("__"):
      raise AttributeError(name)
    return getattr(self.resolve(), name)

  @property
  def pad_id(self) -> int:
    return 0

  @property
  def eos_id(self) -> None:
    return None

  @property
  def bos_id(self) -> None:
    return None

  @property
  def unk_id(self) -> int:
    return self.resolve().unk_id

  @property
  def _base_vocab_size(self) -> int:
    return self.resolve().vocab_size

  def _encode(self, s):
    return self.resolve().encode(s)

  def _decode(self, ids):
    return self.resolve().decode(ids)

  def _encode_tf(self, s):
    return self.resolve().encode_tf(s)

  def _decode_tf(self, ids):
    return self.resolve().decode_tf(ids)

  def __eq__(self, other):
    # Every stand-in resolves to the same get_vocabulary(), so seqio's mixtures, which refuse
    # tasks whose features' vocabularies differ, can mix realm-bench tasks.
    return isinstance(other, LazyVocabulary)

  def __hash__(self):
    return hash(LazyVocabulary)

  def __repr__(self):
    return "LazyVocabulary(get_vocabulary())"


def learn_vocabulary(*, texts: Iterable[str], size: int, out) -> list[str]:
  """Learns an uncased WordPiece vocabulary (reserved tokens first, so PAD=0) and writes it.

  Deterministic: tensorflow_text's learner orders by count, then alphabetically, and we feed
  the texts in the order given. `lower_thresh=1` lets small corpora (the synthetic world)
  reach the requested size instead of stopping at words seen ten times.
  """
  # pylint: disable-next=g-import-not-at-top
  from tensorflow_text.tools.wordpiece_vocab import bert_vocab_from_dataset as learner

  if size <= len(RESERVED_TOKENS):
    raise InputError(f"--size must exceed the {len(RESERVED_TOKENS)} reserved tokens, got {size}")
  texts = [t for t in texts if t and t.strip()]
  if not texts:
    raise InputError("no text to learn a vocabulary from")
  dataset = tf.data.Dataset.from_tensor_slices(tf.constant(texts, dtype=tf.string)).batch(1024)
  tokens = learner.bert_vocab_from_dataset(
      dataset, vocab_size=size, reserved_tokens=list(RESERVED_TOKENS),
      bert_tokenizer_params={"lower_case": True}, learn_params={"lower_thresh": 1})
  atomic_write_text(out, "".join(t + "\n" for t in tokens))
  return tokens


def texts_from_world(root: Path) -> Iterable[str]:
  from realm_bench.tasks import data  # pylint: disable=g-import-not-at-top

  for block in data.iter_blocks(root):
    yield block.title
    yield block.body
  for sentence in data.iter_sentences(root):
    yield sentence.text
  for folder in data.OPEN_QA_FOLDERS:
    for split_file in data.SPLIT_FILES.values():
      if data.open_qa_file(root, folder, split_file) is not None:
        for question, _ in data.read_open_qa(root, folder, split_file):
          yield question


def _texts_from_file(path: Path) -> Iterable[str]:
  """Text fields of a JSONL (title/body/text/question) or DPR passages TSV; else raw lines."""
  from realm_bench.tasks import data  # pylint: disable=g-import-not-at-top

  if not path.is_file():
    raise InputError("file does not exist", path=path)
  if path.suffix == ".jsonl":
    from realm_bench.io_utils import read_jsonl  # pylint: disable=g-import-not-at-top
    fields = ("title", "body", "text", "question")
    for lineno, obj in read_jsonl(path):
      found = [obj[k] for k in fields if isinstance(obj.get(k), str)]
      if not found:
        raise InputError(f"no text field (one of {', '.join(fields)})", path=path, line=lineno)
      yield from found
  elif path.suffix == ".tsv":
    for block in data.iter_passages_tsv(path):
      yield block.title
      yield block.body
  else:
    yield from (line for _, line in read_lines(path))


def texts_from_files(paths) -> Iterable[str]:
  """Every text of the JSONL or TSV corpus files, in order; a file with none is an error."""
  for path in paths:
    found = False
    for text in _texts_from_file(Path(path)):
      found = found or bool(text.strip())
      yield text
    if not found:
      raise InputError("no text to learn a vocabulary from (the file holds only empty text)",
                       path=path)
