"""Where the data lives, how its files are read, and where the real data comes from.

The synthetic world (`realm-bench world --out DIR`) and the real data share one layout under a
root folder, so every task reads both the same way:

```
ROOT/corpus/blocks.jsonl        {"id": int, "title": str, "body": str}          (preferred)
ROOT/corpus/passages.tsv        DPR passages: header "id<TAB>text<TAB>title", then rows
ROOT/pretrain/sentences.jsonl   {"text", "spans": [{"start", "end", "kind"}], "block_id"}
```

`blocks.jsonl` and `sentences.jsonl` may also be sharded, as `realm-bench blocks` writes them:
`corpus/blocks-00000-of-00064.jsonl` ... read in shard order, and only as a complete set (a
missing shard is an error, not a smaller corpus).

```
ROOT/open_qa/{nq,wq,trec}/{train,dev,test}.jsonl    {"question": str, "answer": [str, ...]}
ROOT/open_qa/{nq,wq,trec}/{train,dev,test}.tsv      DPR style: question<TAB>["answer", ...]
```

Span offsets are character (code point) offsets into `text`, end exclusive; `kind` is "entity"
or "date"; `block_id` is the corpus block the sentence came from, or -1.

Real data (DATA_DIR), with the splits the paper (ORQA's) uses:

- NQ-Open (open_qa/nq): 79,168 / 8,757 / 3,610 questions (train / dev / test). ORQA split
  NQ-Open's train set (google-research-datasets/natural-questions, `nq_open/NQ-open.train.jsonl`)
  into train and dev by a question hash (`realm-bench data resplit`); NQ-Open's own dev set
  (`nq_open/NQ-open.dev.jsonl`) is the test split here. DPR's downloads are not the same
  splits: its nq-dev (8,757) is not ORQA's dev (837 of its questions fall in ORQA's dev
  bucket), and its nq-test spells 291 of the 3,610 questions with another tokenisation, so
  predictions keyed to one file's questions miss the other's.
- WebQuestions (open_qa/wq): 3,417 / 361 / 2,032, and CuratedTREC (open_qa/trec): 1,353 / 133 /
  694 lines (693 distinct questions), ORQA's splits of DrQA's `WebQuestions-{train,test}.txt`
  and `CuratedTrec-{train,test}.txt` (`data resplit`); CuratedTREC's answers are regular
  expressions.
  Other layouts (DPR's `.csv` and biencoder `.json`, EfficientQA's files) are read by
  `tasks/qa_files.py`: `realm-bench data convert` writes them as `<split>.jsonl`, and
  `realm-bench data check DATA_DIR` says whether a dev split is ORQA's.
- Knowledge corpus (corpus/): English Wikipedia of 2018-12-20 cut into 13,353,718 blocks of at
  most 288 wordpieces, as released with ORQA/REALM (google-research/language), one
  {"id", "title", "body"} per line. DPR's `psgs_w100.tsv` (21,015,324 passages of 100 words from
  the same dump) is readable as passages.tsv, but it is a different segmentation.
- Pre-training text (pretrain/sentences.jsonl): at paper scale the user supplies sentences with
  spans from a named-entity and date tagger (REALM used a BERT-based NER tagger and a regular
  expression for dates); sentences with no span are skipped by salient-span masking.

Small files (the Open-QA splits) are read and checked when a dataset is created, so a bad line
fails at once as an InputError. The corpus and the pre-training text are streamed, because at
paper scale they do not fit in memory; a bad line there surfaces while iterating, as a
TensorFlow error whose message names the file, line and field (`input_error_from` recovers it).
"""
from __future__ import annotations

import ast
import csv
import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import gin
import seqio

from realm_bench.errors import InputError
from realm_bench.io_utils import read_jsonl, read_lines
from realm_bench.tasks import config
from realm_bench.tasks import shards as shards_lib
from realm_bench.tf_runtime import tf  # TensorFlow kept off the accelerators

OPEN_QA_FOLDERS = ("nq", "wq", "trec")
# seqio split -> file stem.
SPLIT_FILES = {"train": "train", "validation": "dev", "test": "test"}
SPAN_KINDS = ("entity", "date")
BLOCKS_JSONL = "corpus/blocks.jsonl"
PASSAGES_TSV = "corpus/passages.tsv"
SENTENCES_JSONL = "pretrain/sentences.jsonl"
_INT32 = (-2**31, 2**31 - 1)

# Where each real file comes from, for the error a missing file raises.
REAL_DATA = {
    "open_qa/nq": "NQ-Open: ORQA's train/dev split of nq_open/NQ-open.train.jsonl and "
                  "nq_open/NQ-open.dev.jsonl as test (google-research-datasets/natural-questions), "
                  "made with `realm-bench data resplit`; expected 79,168 / 8,757 / 3,610 lines",
    "open_qa/wq": "WebQuestions: ORQA's split of DrQA's WebQuestions-{train,test}.txt, made with "
                  "`realm-bench data resplit`; expected 3,417 / 361 / 2,032 lines",
    "open_qa/trec": "CuratedTREC: ORQA's split of DrQA's CuratedTrec-{train,test}.txt, made with "
                    "`realm-bench data resplit`; expected 1,353 / 133 / 694 lines",
    "corpus": "the 2018-12-20 English Wikipedia blocks released with ORQA/REALM "
              "(google-research/language); expected 13,353,718 lines",
    "pretrain": "sentences you tag with a named-entity and date tagger (REALM's salient spans)",
}


@gin.configurable
def world_dir(path=None) -> Path:
  """The synthetic world's root folder (macro WORLD_DIR, else `configure(world_dir=...)`)."""
  return _existing_root(path if path is not None else config.current().world_dir, "world")


@gin.configurable
def data_dir(path=None) -> Path:
  """The real data's root folder (macro DATA_DIR, else `configure(data_dir=...)`), laid out as
  this module describes."""
  return _existing_root(path if path is not None else config.current().data_dir, "data")


ROOTS: Mapping[str, Callable[[], Path]] = {"world": world_dir, "data": data_dir}
_MACROS = {"world": "WORLD_DIR", "data": "DATA_DIR"}


def _how_to_make(kind: str, relpath: str = "") -> str:
  if kind == "world":
    return ("make a synthetic world with `realm-bench world --out DIR`, then pass "
            f"--gin.WORLD_DIR=\"'DIR'\" (from Python: {config.API}(world_dir=DIR))")
  source = next((v for k, v in REAL_DATA.items() if relpath.startswith(k)), None)
  where = f" ({source})" if source else ""
  return (f"put the real data{where} in a folder laid out as realm_bench/tasks/data.py "
          "describes, then pass --gin.DATA_DIR=\"'DIR'\" "
          f"(from Python: {config.API}(data_dir=DIR))")


def _existing_root(path, kind: str) -> Path:
  macro = _MACROS[kind]
  if path is None:
    raise InputError(f"{macro} is not set; {_how_to_make(kind)}")
  root = Path(path).expanduser()
  if not root.is_dir():
    raise InputError(f"{macro} folder does not exist; {_how_to_make(kind)}", path=root)
  return root


@gin.configurable
@dataclasses.dataclass(frozen=True)
class SequenceLengths:
  """Wordpiece budgets, counting [CLS] and [SEP]s. The entry functions take one (bound from the
  macros QUERY_LEN, BLOCK_LEN, READER_LEN) and pass it down to the pipelines and, as seqio's
  `sequence_length`, to the tasks, so the model, the batches and the tasks cannot disagree.

  query: a question or a masked pre-training sentence, `[CLS] x [SEP]` (96 in the paper).
  block: a corpus block, `[CLS] title [SEP] body [SEP]` (288 in the paper).
  reader: the knowledge-augmented encoder's input, a query joined with a block; None is the
    shortest that holds the longest query and block (the smallest compiled step).
  """
  query: int = 96
  block: int = 288
  reader: int | None = None

  def __post_init__(self):
    if not isinstance(self.query, int) or self.query < 3:
      raise InputError(f"must be at least 3 ([CLS] token [SEP]), got {self.query!r}",
                       field="QUERY_LEN")
    if not isinstance(self.block, int) or self.block < 4:
      raise InputError(f"must be at least 4 ([CLS] [SEP] body [SEP]), got {self.block!r}",
                       field="BLOCK_LEN")
    if self.reader is not None and (not isinstance(self.reader, int) or self.reader < 4):
      raise InputError(f"must be None or at least 4, got {self.reader!r}", field="READER_LEN")

  def for_queries(self) -> dict[str, int]:
    """seqio `sequence_length` of the Open-QA and pre-training tasks."""
    return {"inputs": self.query, "targets": self.query}

  def for_blocks(self) -> dict[str, int]:
    """seqio `sequence_length` of the corpus tasks."""
    return {"inputs": self.block}


def feature_length(sequence_length, key: str, task_kind: str) -> int:
  """`sequence_length[key]`, which the realm-bench tasks need to know their budgets."""
  if not sequence_length or sequence_length.get(key) is None:
    raise InputError(f"the {task_kind} tasks need sequence_length[{key!r}] (pass "
                     f"SequenceLengths().for_queries() or .for_blocks() to get_dataset)",
                     field="sequence_length")
  return int(sequence_length[key])


def _missing(root: Path, relpath: str, kind: str, also: str = "") -> InputError:
  return InputError(f"missing{also}; {_how_to_make(kind, relpath)}", path=root / relpath)


# Open-QA questions.


def open_qa_file(root: Path, folder: str, split_file: str) -> Path | None:
  """The split's file, preferring JSONL over DPR-style TSV; None when neither exists."""
  for suffix in (".jsonl", ".tsv"):
    path = root / "open_qa" / folder / (split_file + suffix)
    if path.is_file():
      return path
  return None


def check_answers(answers, path, lineno, field: str = "answer") -> list[str]:
  if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
    raise InputError("expected a list of answer strings", path=path, line=lineno, field=field)
  if not answers:
    raise InputError("empty answer list: every question needs at least one gold answer",
                     path=path, line=lineno, field=field)
  return answers


def check_question(question, path, lineno) -> str:
  if not isinstance(question, str):
    raise InputError(f"expected a string, got {type(question).__name__}", path=path,
                     line=lineno, field="question")
  if not question.strip():
    raise InputError("expected a non-empty string", path=path, line=lineno, field="question")
  return question


def open_qa_tsv_row(line: str, path, lineno: int) -> tuple[str, list[str]]:
  """One `question<TAB>answers` line, split on the tab without csv quoting: a question that
  starts with `"` would otherwise open a quoted field that swallows the lines after it
  without a word (679 of CuratedTREC's 694 test rows)."""
  row = line.split("\t")
  if len(row) != 2:
    raise InputError(f"expected 2 tab-separated columns, got {len(row)}", path=path,
                     line=lineno)
  try:
    answers = json.loads(row[1])
  except ValueError:
    try:  # DPR writes the list as a python literal: ['a', "b's"]
      answers = ast.literal_eval(row[1])
    except (ValueError, SyntaxError):
      raise InputError("not a JSON or python list of strings", path=path, line=lineno,
                       field="answer") from None
  return check_question(row[0], path, lineno), check_answers(answers, path, lineno)


def read_open_qa_tsv(path: Path) -> Iterator[tuple[str, list[str]]]:
  """One question per line (`open_qa_tsv_row`); blank lines are skipped."""
  for lineno, line in read_lines(path):
    if line.strip():
      yield open_qa_tsv_row(line, path, lineno)


# Rows of the real splits (DPR's and ORQA's files), to catch a file that was cut or mis-split.
EXPECTED_ROWS = {("nq", "train"): 79168, ("nq", "dev"): 8757, ("nq", "test"): 3610,
                 ("wq", "train"): 3417, ("wq", "dev"): 361, ("wq", "test"): 2032,
                 ("trec", "train"): 1353, ("trec", "dev"): 133, ("trec", "test"): 694}
# Distinct questions, where known: the official evaluation keys references by question text,
# so a repeated question counts once (CuratedTREC's test file has one twice).
EXPECTED_QUESTIONS = {("trec", "test"): 693}


def read_open_qa(root: Path, folder: str, split_file: str, *,
                 kind: str = "world") -> list[tuple[str, list[str]]]:
  """All (question, answers) of one split; every line checked."""
  path = open_qa_file(root, folder, split_file)
  if path is None:
    raise _missing(root, f"open_qa/{folder}/{split_file}.jsonl", kind,
                   also=f" (nor {split_file}.tsv)")
  if path.suffix == ".tsv":
    rows = list(read_open_qa_tsv(path))
  else:
    rows = [(check_question(obj["question"], path, lineno),
             check_answers(obj["answer"], path, lineno))
            for lineno, obj in read_jsonl(path, required=("question", "answer"))]
  if not rows:
    raise InputError("no questions in file", path=path)
  expected = EXPECTED_ROWS.get((folder, split_file)) if kind == "data" else None
  if expected is not None and len(rows) != expected:
    print(f"warning: {path}: {len(rows):,} questions, the released split has {expected:,}",
          file=sys.stderr)
  return rows


# Corpus blocks.


@dataclasses.dataclass(frozen=True)
class Block:
  id: int
  title: str
  body: str


def _check_id(value, path, lineno, field="id") -> int:
  if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
    value = int(value)
  if isinstance(value, bool) or not isinstance(value, int) or not _INT32[0] <= value <= _INT32[1]:
    raise InputError(f"expected a 32-bit integer, got {value!r}", path=path, line=lineno,
                     field=field)
  return value


def _check_text(value, path, lineno, field) -> str:
  if not isinstance(value, str):
    raise InputError(f"expected a string, got {type(value).__name__}", path=path, line=lineno,
                     field=field)
  return value


def iter_passages_tsv(path: Path) -> Iterator[Block]:
  """DPR's passages file: header `id text title`, csv-quoted like DPR writes it."""
  csv.field_size_limit(sys.maxsize)
  if not path.is_file():
    raise InputError("file does not exist", path=path)
  # Lines are decoded one at a time so that a byte that is not UTF-8 names its line.
  reader = csv.reader((line + "\n" for _, line in read_lines(path)), delimiter="\t")
  header = next(reader, None)
  if header != ["id", "text", "title"]:
    raise InputError(f"expected the header id<TAB>text<TAB>title, got {header!r}", path=path,
                     line=1)
  end = reader.line_num
  for row in reader:
    lineno, end = end + 1, reader.line_num
    if not row:
      continue
    if lineno != end:   # DPR's passages hold no newline: a stray `"` opened a quoted field
      raise InputError(f"a quoted field runs on over lines {lineno}-{end} (an unbalanced "
                       "'\"'?); the rows inside it would be lost", path=path, line=lineno)
    if len(row) != 3:
      raise InputError(f"expected 3 tab-separated columns, got {len(row)}", path=path,
                       line=lineno)
    yield Block(_check_id(row[0], path, lineno), row[2], row[1])


def corpus_files(root: Path, *, kind: str = "world") -> list[Path]:
  for relpath in (BLOCKS_JSONL, PASSAGES_TSV):
    if (root / relpath).is_file():
      return [root / relpath]
  shards = shards_lib.shard_files(root, BLOCKS_JSONL)
  if shards:
    return shards
  raise _missing(root, BLOCKS_JSONL, kind, also=f" (nor {PASSAGES_TSV}, nor shards)")


def iter_blocks(root: Path, *, kind: str = "world") -> Iterator[Block]:
  for path in corpus_files(root, kind=kind):
    if path.suffix == ".tsv":
      yield from iter_passages_tsv(path)
      continue
    for lineno, obj in read_jsonl(path, required=BLOCK_FIELDS):
      yield block_of(obj, path, lineno)


BLOCK_FIELDS = ("id", "title", "body")


def block_of(obj: dict, path, lineno: int) -> Block:
  """One blocks.jsonl object, checked (its keys are there: BLOCK_FIELDS)."""
  if isinstance(obj["id"], str):
    raise InputError("expected an integer, got a string", path=path, line=lineno, field="id")
  return Block(_check_id(obj["id"], path, lineno),
               _check_text(obj["title"], path, lineno, "title"),
               _check_text(obj["body"], path, lineno, "body"))


# Pre-training sentences.


@dataclasses.dataclass(frozen=True)
class Sentence:
  text: str
  starts: tuple[int, ...]
  ends: tuple[int, ...]
  block_id: int


def _check_spans(spans, text: str, path, lineno) -> tuple[tuple[int, ...], tuple[int, ...]]:
  if not isinstance(spans, list):
    raise InputError("expected a list", path=path, line=lineno, field="spans")
  starts, ends = [], []
  for i, span in enumerate(spans):
    where = f"spans[{i}]"
    if not isinstance(span, dict):
      raise InputError("expected an object", path=path, line=lineno, field=where)
    for key in ("start", "end", "kind"):
      if key not in span:
        raise InputError("missing", path=path, line=lineno, field=f"{where}.{key}")
    start, end = span["start"], span["end"]
    for key, value in (("start", start), ("end", end)):
      if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", path=path, line=lineno,
                         field=f"{where}.{key}")
    if not 0 <= start < end <= len(text):
      raise InputError(f"span [{start}, {end}) is empty or outside the text's {len(text)} "
                       "characters", path=path, line=lineno, field=where)
    if span["kind"] not in SPAN_KINDS:
      raise InputError(f"expected one of {SPAN_KINDS}, got {span['kind']!r}", path=path,
                       line=lineno, field=f"{where}.kind")
    starts.append(start)
    ends.append(end)
  return tuple(starts), tuple(ends)


def sentence_files(root: Path, *, kind: str = "world") -> list[Path]:
  if (root / SENTENCES_JSONL).is_file():
    return [root / SENTENCES_JSONL]
  shards = shards_lib.shard_files(root, SENTENCES_JSONL)
  if shards:
    return shards
  raise _missing(root, SENTENCES_JSONL, kind)


def iter_sentences(root: Path, *, kind: str = "world") -> Iterator[Sentence]:
  for path in sentence_files(root, kind=kind):
    for lineno, obj in read_jsonl(path, required=SENTENCE_FIELDS):
      yield sentence_of(obj, path, lineno)


SENTENCE_FIELDS = ("text", "spans")


def sentence_of(obj: dict, path, lineno: int) -> Sentence:
  """One sentences.jsonl object, checked (its keys are there: SENTENCE_FIELDS)."""
  text = _check_text(obj["text"], path, lineno, "text")
  starts, ends = _check_spans(obj["spans"], text, path, lineno)
  block_id = _check_id(obj.get("block_id", -1), path, lineno, field="block_id")
  return Sentence(text, starts, ends, block_id)


# tf.data datasets.


def open_qa_dataset(root: Path, folder: str, split: str, *, kind: str) -> tf.data.Dataset:
  """{"question": string, "answers": string [n]} per question, in file order."""
  rows = read_open_qa(root, folder, SPLIT_FILES[split], kind=kind)
  ds = tf.data.Dataset.from_tensor_slices({
      "question": tf.constant([q for q, _ in rows], dtype=tf.string),
      "answers": tf.ragged.constant([a for _, a in rows], dtype=tf.string),
  })
  # A map turns the sliced ragged rows into plain string vectors.
  return ds.map(lambda ex: {"question": ex["question"], "answers": ex["answers"]})


def corpus_dataset(root: Path, *, kind: str) -> tf.data.Dataset:
  """{"id": int32, "title": string, "body": string} per block, in file order (streamed)."""
  corpus_files(root, kind=kind)  # fail now, not on first read, when a file is missing

  def generate():
    for block in iter_blocks(root, kind=kind):
      yield {"id": block.id, "title": block.title, "body": block.body}

  return tf.data.Dataset.from_generator(generate, output_signature={
      "id": tf.TensorSpec([], tf.int32),
      "title": tf.TensorSpec([], tf.string),
      "body": tf.TensorSpec([], tf.string),
  })


def sentences_dataset(root: Path, *, kind: str) -> tf.data.Dataset:
  """{"text", "span_starts" int32 [s], "span_ends" int32 [s], "block_id" int32} (streamed)."""
  sentence_files(root, kind=kind)  # fail now, not on first read, when a file is missing

  def generate():
    for s in iter_sentences(root, kind=kind):
      yield {"text": s.text, "span_starts": list(s.starts), "span_ends": list(s.ends),
             "block_id": s.block_id}

  return tf.data.Dataset.from_generator(generate, output_signature={
      "text": tf.TensorSpec([], tf.string),
      "span_starts": tf.TensorSpec([None], tf.int32),
      "span_ends": tf.TensorSpec([None], tf.int32),
      "block_id": tf.TensorSpec([], tf.int32),
  })


class RootedSource(seqio.FunctionDataSource):
  """A seqio source whose root folder is read from gin when a dataset is created.

  Tasks are registered at import time, before gin is parsed; asking `world_dir()` or
  `data_dir()` only inside `get_dataset` lets one registration serve any WORLD_DIR/DATA_DIR.
  """

  def __init__(self, *, kind: str, files: str,
               make: Callable[[Path, str], tf.data.Dataset], splits: Sequence[str]):
    if kind not in ROOTS:
      raise ValueError(f"unknown root kind {kind!r}; expected one of {sorted(ROOTS)}")
    self.kind = kind
    self.files = files
    self._make = make
    super().__init__(dataset_fn=self._read, splits=splits)

  @property
  def macro(self) -> str:
    return _MACROS[self.kind]

  def _read(self, split, shuffle_files, seed=None):
    del shuffle_files, seed  # one file per split; seqio shuffles examples downstream
    return self._make(ROOTS[self.kind](), split)

  def __repr__(self):
    return f"{type(self).__name__}({self.macro}/{self.files}, splits={list(self.splits)})"


def input_error_from(error: BaseException) -> InputError | None:
  """The InputError inside a TensorFlow error raised while streaming a file, if there is one."""
  if isinstance(error, InputError):
    return error
  match = re.search(r"InputError: ([^\n]*)", str(error))
  return InputError(match.group(1)) if match else None
