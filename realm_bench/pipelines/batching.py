"""Host-side featurisation: examples plus retrieved blocks in, fixed-shape model batches out.

This is where REALM's inputs are assembled, as in the released code's featurizer:
  pre-training   candidates  [CLS] title [SEP] body [SEP]   (document tower)
                 joint input [CLS] x [SEP] body [SEP]        (knowledge-augmented encoder)
                 candidate 0 is the null document: [CLS] [SEP] [SEP] and a query-only joint input
  Open-QA        reader input [CLS] q [SEP] title [SEP] body [SEP], spans inside the body only,
                 indexed by body wordpiece (the span head reads the body's positions only)
All arrays are padded to fixed shapes so one compiled step serves the whole run. Each batch's
keys, shapes and dtypes are declared once, in ICT_BATCH, REALM_BATCH and OPEN_QA_BATCH: the
models' docstrings, the benchmarks and the tests read them from here.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Mapping, Sequence

import numpy as np

from realm_bench.errors import InputError
from realm_bench.tasks.metrics import REGEX_FLAGS, to_text


# ------------------------------------------------------------------------------------------
# Batch specs.
# ------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Field:
  dims: tuple[str, ...]   # symbolic sizes, e.g. ("batch", "query_len")
  dtype: str
  doc: str
  optional: bool = False  # absent from prediction batches (gold spans)


@dataclasses.dataclass(frozen=True)
class BatchSpec:
  """One model's batch layout: every key with its symbolic shape and dtype."""
  name: str
  fields: Mapping[str, Field]

  def shapes(self, **sizes: int) -> dict[str, tuple[int, ...]]:
    missing = sorted({d for f in self.fields.values() for d in f.dims} - set(sizes))
    if missing:
      raise ValueError(f"{self.name}: sizes for {missing} are needed")
    return {k: tuple(sizes[d] for d in f.dims) for k, f in self.fields.items()}

  def zeros(self, *, with_optional: bool = True, **sizes: int) -> dict[str, np.ndarray]:
    """An all-zero batch of these shapes (benchmarks fill it; shape checks use it)."""
    shapes = self.shapes(**sizes)
    return {k: np.zeros(shapes[k], self.fields[k].dtype) for k, f in self.fields.items()
            if with_optional or not f.optional}

  def check(self, batch: Mapping[str, np.ndarray]) -> dict[str, int]:
    """Raises ValueError unless `batch` has exactly these keys, ranks and dtypes, with one size
    per symbolic dimension; returns the sizes."""
    required = {k for k, f in self.fields.items() if not f.optional}
    extra, missing = set(batch) - set(self.fields), required - set(batch)
    if extra or missing:
      raise ValueError(f"{self.name}: unexpected keys {sorted(extra)}, missing {sorted(missing)}")
    sizes: dict[str, int] = {}
    for key, array in batch.items():
      field = self.fields[key]
      if np.asarray(array).dtype != np.dtype(field.dtype) or np.ndim(array) != len(field.dims):
        raise ValueError(f"{self.name}.{key}: expected {field.dtype} of rank {len(field.dims)}, "
                         f"got {np.asarray(array).dtype} of shape {np.shape(array)}")
      for dim, size in zip(field.dims, np.shape(array)):
        if sizes.setdefault(dim, size) != size:
          raise ValueError(f"{self.name}.{key}: {dim} is {size}, elsewhere {sizes[dim]}")
    return sizes


ICT_BATCH = BatchSpec("ict", {
    "query_ids": Field(("batch", "query_len"), "int32", "[CLS] sentence [SEP] (the pseudo-query)"),
    "doc_ids": Field(("batch", "block_len"), "int32",
                     "[CLS] title [SEP] block without the sentence (mostly) [SEP]"),
})

MLM_BATCH = BatchSpec("mlm", {
    "input_ids": Field(("batch", "input_len"), "int32",
                       "[CLS] masked sentence [SEP] (BERT stage), or [CLS] question [SEP] "
                       "[MASK]... [SEP] (closed-book)"),
    "input_types": Field(("batch", "input_len"), "int32",
                         "segment ids (a second passage = 1); zeros when absent", optional=True),
    "mlm_positions": Field(("batch", "masks"), "int32", "positions to predict"),
    "mlm_targets": Field(("batch", "masks"), "int32", "their ids"),
    "mlm_weights": Field(("batch", "masks"), "float32", "1 for a real slot, 0 for padding"),
    "next_is_random": Field(("batch",), "int32", "1 where the second segment is a random "
                            "sentence, not a restatement (BERT's next-sentence label)",
                            optional=True),
    "next_sentence_weights": Field(("batch",), "float32", "1 for a row with a second segment",
                                   optional=True),
})

REALM_BATCH = BatchSpec("realm_pretrain", {
    "query_ids": Field(("batch", "query_len"), "int32", "[CLS] masked sentence [SEP]"),
    "mlm_positions": Field(("batch", "masks"), "int32", "positions of the masked wordpieces"),
    "mlm_targets": Field(("batch", "masks"), "int32", "their original ids"),
    "mlm_weights": Field(("batch", "masks"), "float32", "1 for a real mask slot, 0 for padding"),
    "cand_doc_ids": Field(("batch", "candidates", "block_len"), "int32",
                          "document-tower inputs; candidate 0 is the null document"),
    "joint_ids": Field(("batch", "candidates", "joint_len"), "int32",
                       "[CLS] x [SEP] body [SEP] for the knowledge-augmented encoder"),
    "joint_types": Field(("batch", "candidates", "joint_len"), "int32", "segment ids (body = 1)"),
    "cand_valid": Field(("batch", "candidates"), "float32", "1 for a real candidate"),
    "cand_is_source": Field(("batch", "candidates"), "float32",
                            "1 for the block the sentence was taken from (metrics only)",
                            optional=True),
})

OPEN_QA_BATCH = BatchSpec("open_qa", {
    "query_ids": Field(("batch", "query_len"), "int32", "[CLS] question [SEP]"),
    "retrieved_doc_emb": Field(("batch", "retrieved", "proj_dim"), "float32",
                               "frozen index embeddings of the retrieved blocks, MIPS order"),
    "retrieved_valid": Field(("batch", "retrieved"), "float32", "1 for a real block"),
    "retrieved_has_answer": Field(("batch", "retrieved"), "float32",
                                  "1 where the block holds a gold span (retriever marginal)"),
    "reader_ids": Field(("batch", "read", "reader_len"), "int32",
                        "[CLS] q [SEP] title [SEP] body [SEP] of the first `read` blocks"),
    "reader_types": Field(("batch", "read", "reader_len"), "int32", "segment ids (block = 1)"),
    "body_positions": Field(("batch", "read", "body"), "int32",
                            "reader position of each body wordpiece, 0 past the body: the "
                            "span head reads only these (body = the corpus's longest body)"),
    "body_len": Field(("batch", "read"), "int32", "body wordpieces in the reader input"),
    "gold_spans": Field(("batch", "read", "body", "max_span_len"), "float32",
                        "1 at (start, width) of every gold span, start a body wordpiece index "
                        "(training only)", optional=True),
})


@dataclasses.dataclass
class Corpus:
  """The knowledge corpus, tokenised once, in memory (from the corpus seqio task). The
  pipelines read `token_file.TokenCorpus`, its memory-mapped form with the same interface."""
  ids: np.ndarray                 # [N] block ids
  titles: list[str]
  bodies: list[str]
  doc_inputs: np.ndarray          # [N, block_len] [CLS] title [SEP] body [SEP], 0-padded
  title_ids: list[np.ndarray]
  body_ids: list[np.ndarray]
  body_starts: list[np.ndarray]   # character offsets of each body wordpiece
  body_ends: list[np.ndarray]

  def __post_init__(self):
    self.row_of = {int(i): r for r, i in enumerate(self.ids)}

  def rows(self, block_ids) -> np.ndarray:
    return np.vectorize(self.row_of.__getitem__, otypes=[np.int64])(block_ids)

  def row(self, block_id: int) -> int:
    return self.row_of[block_id]

  def body(self, row: int) -> np.ndarray:
    return self.body_ids[row]

  @property
  def max_body_len(self) -> int:
    return max((len(b) for b in self.body_ids), default=0)

  @property
  def max_title_len(self) -> int:
    return max((len(t) for t in self.title_ids), default=0)


@dataclasses.dataclass(frozen=True)
class Specials:
  cls: int
  sep: int
  mask: int


def pad_rows(rows: Sequence[np.ndarray], length: int, *, truncate: bool = False) -> np.ndarray:
  """Zero-padded int32 [len(rows), length]. A longer row is an error unless `truncate`: the
  tasks already keep within their sequence lengths, so a longer row means two lengths
  disagree, which must not pass as a silent cut."""
  out = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    r = np.asarray(r)
    if len(r) > length:
      if not truncate:
        raise InputError(f"a row of {len(r)} ids does not fit the sequence length {length}")
      r = r[:length]
    out[i, :len(r)] = r
  return out


def fitted_length(needed: int, given: int | None, what: str) -> int:
  """`given`, or the shortest length that holds the data when None; shorter is an error."""
  if given is None:
    return needed
  if given < needed:
    raise InputError(f"{what} length {given} is shorter than the {needed} wordpieces the data "
                     f"need (query + block)", field="SequenceLengths.reader")
  return given


# ------------------------------------------------------------------------------------------
# Pre-training.
# ------------------------------------------------------------------------------------------

def mask_slots(targets: Sequence[np.ndarray], max_masks: int):
  """(positions, targets, weights) [B, max_masks] of the non-zero entries of each targets row
  (ids at masked positions, 0 elsewhere, as the pre-training task writes them)."""
  positions = np.zeros((len(targets), max_masks), np.int32)
  ids = np.zeros((len(targets), max_masks), np.int32)
  weights = np.zeros((len(targets), max_masks), np.float32)
  for i, t in enumerate(targets):
    t = np.asarray(t)
    pos = np.flatnonzero(t)[:max_masks]
    positions[i, :len(pos)] = pos
    ids[i, :len(pos)] = t[pos]
    weights[i, :len(pos)] = 1.0
  return positions, ids, weights


def mlm_batch(examples: Sequence[dict], *, input_len: int, max_masks: int) -> dict:
  """MLM_BATCH from {"inputs", "targets"} pre-training examples (the BERT stage)."""
  positions, targets, weights = mask_slots([e["targets"] for e in examples], max_masks)
  return {"input_ids": pad_rows([e["inputs"] for e in examples], input_len),
          "mlm_positions": positions, "mlm_targets": targets, "mlm_weights": weights}


def select_candidates(retrieved_ids: np.ndarray, exclude: np.ndarray, num: int):
  """The first `num` retrieved blocks per row, skipping the block the sentence came from."""
  out = np.full((retrieved_ids.shape[0], num), -1, np.int64)
  for b, row in enumerate(retrieved_ids):
    kept = [i for i in row if i != exclude[b]][:num]
    out[b, :len(kept)] = kept
  return out


def pretrain_batch(examples: Sequence[dict], candidate_ids: np.ndarray, corpus,
                   specials: Specials, *, query_len: int, max_masks: int,
                   joint_len: int | None = None) -> dict:
  """REALM_BATCH from {"inputs", "targets"} pre-training examples and candidate_ids [B, K-1].

  `corpus`: a `Corpus` or a `token_file.TokenCorpus`.

  `joint_len` None: the shortest that holds a query and the longest body."""
  b, k1 = candidate_ids.shape
  k = k1 + 1
  block_len = corpus.doc_inputs.shape[1]
  body_len = corpus.max_body_len
  query_ids = pad_rows([e["inputs"] for e in examples], query_len)
  positions, targets, weights = mask_slots([e["targets"] for e in examples], max_masks)
  null_doc = np.zeros(block_len, np.int32)
  null_doc[:3] = [specials.cls, specials.sep, specials.sep]
  cand_doc_ids = np.zeros((b, k, block_len), np.int32)
  cand_doc_ids[:, 0] = null_doc
  joint_len = fitted_length(query_len + body_len + 1, joint_len, "joint (knowledge-augmented "
                            "encoder)")
  joint_ids = np.zeros((b, k, joint_len), np.int32)
  joint_types = np.zeros((b, k, joint_len), np.int32)
  valid = np.zeros((b, k), np.float32)
  valid[:, 0] = 1.0
  for i, e in enumerate(examples):
    q = np.asarray(e["inputs"])
    joint_ids[i, :, :len(q)] = q
    for j, block in enumerate(candidate_ids[i], start=1):
      if block < 0:
        continue
      row = corpus.row(int(block))
      cand_doc_ids[i, j] = corpus.doc_inputs[row]
      body = np.append(corpus.body(row), specials.sep)
      joint_ids[i, j, len(q):len(q) + len(body)] = body
      joint_types[i, j, len(q):len(q) + len(body)] = 1
      valid[i, j] = 1.0
  return {"query_ids": query_ids, "mlm_positions": positions, "mlm_targets": targets,
          "mlm_weights": weights, "cand_doc_ids": cand_doc_ids, "joint_ids": joint_ids,
          "joint_types": joint_types, "cand_valid": valid}


# ------------------------------------------------------------------------------------------
# Open-QA.
# ------------------------------------------------------------------------------------------

def _find_subsequence(haystack: np.ndarray, needle: np.ndarray) -> list[int]:
  n = len(needle)
  if n == 0 or n > len(haystack):
    return []
  windows = np.lib.stride_tricks.sliding_window_view(haystack, n)
  return list(np.flatnonzero(np.all(windows == needle, axis=1)))


class AnswerMatcher:
  """Finds gold answer spans (wordpiece indices into a block body).

  String answers are matched as wordpiece sequences (so matching is uncased, like the
  tokenizer); regex answers (CuratedTREC) are searched in the raw body text and mapped to the
  wordpieces that the match covers.
  """

  def __init__(self, encode, *, regex: bool):
    self.encode = encode
    self.regex = regex
    self._cache: dict[str, object] = {}   # answer -> compiled pattern or wordpiece ids
    self._spans: dict[tuple, list] = {}    # (answers, block row, max_span_len) -> spans

  def _compiled(self, answer: str):
    if answer not in self._cache:
      if self.regex:
        try:
          self._cache[answer] = re.compile(answer, REGEX_FLAGS)
        except re.error:
          self._cache[answer] = None
      else:
        self._cache[answer] = np.asarray(self.encode(answer), np.int64)
    return self._cache[answer]

  def spans(self, answers: Sequence[str], corpus: Corpus, row: int, max_span_len: int):
    key = (tuple(answers), int(row), max_span_len)
    if key not in self._spans:
      self._spans[key] = self._find(answers, corpus, row, max_span_len)
    return self._spans[key]

  def _find(self, answers, corpus, row, max_span_len):
    found = set()
    body_ids = corpus.body_ids[row]
    for answer in answers:
      pattern = self._compiled(answer)
      if pattern is None:
        continue
      if self.regex:
        starts, ends = corpus.body_starts[row], corpus.body_ends[row]
        for m in pattern.finditer(corpus.bodies[row]):
          if m.end() <= m.start():
            continue
          inside = np.flatnonzero((starts >= m.start()) & (ends <= m.end()))
          if len(inside) and inside[-1] - inside[0] < max_span_len:
            found.add((int(inside[0]), int(inside[-1])))
      else:
        n = len(pattern)
        if n > max_span_len:
          continue
        found.update((s, s + n - 1) for s in _find_subsequence(body_ids, pattern))
    return sorted(found)


def qa_batch(examples: Sequence[dict], retrieved_ids: np.ndarray, doc_embeddings: np.ndarray,
             corpus: Corpus, specials: Specials, matcher: AnswerMatcher, *, query_len: int,
             num_read: int, max_span_len: int, with_gold: bool = True,
             reader_len: int | None = None) -> dict:
  """OPEN_QA_BATCH from {"inputs", "answers"} examples; retrieved_ids [B, N] in MIPS order
  (-1 = none). `reader_len` None: the shortest that holds a query, a title and a body.

  The first `num_read` blocks go to the reader; all N feed the retriever's marginal.
  `doc_embeddings` are the frozen index embeddings, row-aligned with `corpus`.
  """
  b, n = retrieved_ids.shape
  reader_len = fitted_length(query_len + corpus.max_title_len + corpus.max_body_len + 2,
                             reader_len, "reader")
  valid = retrieved_ids >= 0
  rows = np.where(valid, corpus.rows(np.where(valid, retrieved_ids, corpus.ids[0])), 0)
  batch = {
      "query_ids": pad_rows([e["inputs"] for e in examples], query_len),
      "retrieved_doc_emb": doc_embeddings[rows] * valid[..., None],
      "retrieved_valid": valid.astype(np.float32),
      "retrieved_has_answer": np.zeros((b, n), np.float32),
      "reader_ids": np.zeros((b, num_read, reader_len), np.int32),
      "reader_types": np.zeros((b, num_read, reader_len), np.int32),
      "body_positions": np.zeros((b, num_read, corpus.max_body_len), np.int32),
      "body_len": np.zeros((b, num_read), np.int32),
  }
  if with_gold:
    batch["gold_spans"] = np.zeros((b, num_read, corpus.max_body_len, max_span_len), np.float32)
  for i, e in enumerate(examples):
    q = np.asarray(e["inputs"])
    answers = [to_text(a) for a in e.get("answers", [])]
    for j in range(n):
      if not valid[i, j]:
        continue
      row = rows[i, j]
      spans = matcher.spans(answers, corpus, row, max_span_len) if with_gold else []
      batch["retrieved_has_answer"][i, j] = float(bool(spans))
      if j >= num_read:
        continue
      title = corpus.title_ids[row]
      body = corpus.body_ids[row]
      seq = np.concatenate([q, title, [specials.sep], body, [specials.sep]]).astype(np.int32)
      start = len(q) + len(title) + 1
      batch["reader_ids"][i, j, :len(seq)] = seq
      batch["reader_types"][i, j, len(q):len(seq)] = 1
      batch["body_positions"][i, j, :len(body)] = np.arange(start, start + len(body))
      batch["body_len"][i, j] = len(body)
      for s, t in spans:
        batch["gold_spans"][i, j, s, t - s] = 1.0
  return batch


def answer_text(corpus, block_id: int, start: int, end: int) -> str:
  """Cuts a predicted span (body wordpiece indices) out of the original block text."""
  row = corpus.row(int(block_id))
  return corpus.bodies[row][int(corpus.body_starts[row][start]):int(corpus.body_ends[row][end])]
