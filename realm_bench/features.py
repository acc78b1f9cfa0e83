"""Host-side featurisation: turning examples plus retrieved blocks into model batches.

This is where REALM's inputs are assembled, as in the released code's featurizer:
  pre-training   candidates  [CLS] title [SEP] body [SEP]   (document tower)
                 joint input [CLS] x [SEP] body [SEP]        (knowledge-augmented encoder)
                 candidate 0 is the null document: [CLS] [SEP] [SEP] and a query-only joint input
  Open-QA        reader input [CLS] q [SEP] title [SEP] body [SEP], spans inside the body only
All arrays are padded to fixed shapes so one compiled step serves the whole run.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Sequence

import numpy as np

from realm_bench.tasks.metrics import REGEX_FLAGS, to_text


@dataclasses.dataclass
class Corpus:
  """The knowledge corpus, tokenised once (from the corpus seqio task)."""
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

  @property
  def max_body_len(self) -> int:
    return max((len(b) for b in self.body_ids), default=0)


@dataclasses.dataclass(frozen=True)
class Specials:
  cls: int
  sep: int
  mask: int


def pad_rows(rows: Sequence[np.ndarray], length: int) -> np.ndarray:
  out = np.zeros((len(rows), length), np.int32)
  for i, r in enumerate(rows):
    r = np.asarray(r)[:length]
    out[i, :len(r)] = r
  return out


# ------------------------------------------------------------------------------------------
# Pre-training.
# ------------------------------------------------------------------------------------------

def select_candidates(retrieved_ids: np.ndarray, exclude: np.ndarray, num: int):
  """The first `num` retrieved blocks per row, skipping the block the sentence came from."""
  out = np.full((retrieved_ids.shape[0], num), -1, np.int64)
  for b, row in enumerate(retrieved_ids):
    kept = [i for i in row if i != exclude[b]][:num]
    out[b, :len(kept)] = kept
  return out


def pretrain_batch(examples: Sequence[dict], candidate_ids: np.ndarray, corpus: Corpus,
                   specials: Specials, *, query_len: int, max_masks: int) -> dict:
  """examples: {"inputs", "targets"} from the pre-training task; candidate_ids [B, K-1]."""
  b, k1 = candidate_ids.shape
  k = k1 + 1
  block_len = corpus.doc_inputs.shape[1]
  body_len = corpus.max_body_len
  query_ids = pad_rows([e["inputs"] for e in examples], query_len)
  positions = np.zeros((b, max_masks), np.int32)
  targets = np.zeros((b, max_masks), np.int32)
  weights = np.zeros((b, max_masks), np.float32)
  for i, e in enumerate(examples):
    t = np.asarray(e["targets"])[:query_len]
    pos = np.flatnonzero(t)[:max_masks]
    positions[i, :len(pos)] = pos
    targets[i, :len(pos)] = t[pos]
    weights[i, :len(pos)] = 1.0
  null_doc = np.zeros(block_len, np.int32)
  null_doc[:3] = [specials.cls, specials.sep, specials.sep]
  cand_doc_ids = np.zeros((b, k, block_len), np.int32)
  cand_doc_ids[:, 0] = null_doc
  joint_len = query_len + body_len + 1
  joint_ids = np.zeros((b, k, joint_len), np.int32)
  joint_types = np.zeros((b, k, joint_len), np.int32)
  valid = np.zeros((b, k), np.float32)
  valid[:, 0] = 1.0
  for i, e in enumerate(examples):
    q = np.asarray(e["inputs"])[:query_len]
    joint_ids[i, :, :len(q)] = q
    for j, block in enumerate(candidate_ids[i], start=1):
      if block < 0:
        continue
      row = corpus.row_of[int(block)]
      cand_doc_ids[i, j] = corpus.doc_inputs[row]
      body = np.append(corpus.body_ids[row][:body_len], specials.sep)
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
             num_read: int, max_span_len: int, with_gold: bool = True) -> dict:
  """examples: {"inputs", "answers"}; retrieved_ids [B, N] in MIPS order (-1 = none).

  The first `num_read` blocks go to the reader; all N feed the retriever's marginal.
  `doc_embeddings` are the frozen index embeddings, row-aligned with `corpus`.
  """
  b, n = retrieved_ids.shape
  title_len = max((len(t) for t in corpus.title_ids), default=0)
  reader_len = query_len + title_len + corpus.max_body_len + 2
  valid = retrieved_ids >= 0
  rows = np.where(valid, corpus.rows(np.where(valid, retrieved_ids, corpus.ids[0])), 0)
  batch = {
      "query_ids": pad_rows([e["inputs"] for e in examples], query_len),
      "retrieved_doc_emb": doc_embeddings[rows] * valid[..., None],
      "retrieved_valid": valid.astype(np.float32),
      "retrieved_has_answer": np.zeros((b, n), np.float32),
      "reader_ids": np.zeros((b, num_read, reader_len), np.int32),
      "reader_types": np.zeros((b, num_read, reader_len), np.int32),
      "body_start": np.zeros((b, num_read), np.int32),
      "body_len": np.zeros((b, num_read), np.int32),
  }
  if with_gold:
    batch["gold_spans"] = np.zeros((b, num_read, reader_len, max_span_len), np.float32)
  for i, e in enumerate(examples):
    q = np.asarray(e["inputs"])[:query_len]
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
      batch["body_start"][i, j] = start
      batch["body_len"][i, j] = len(body)
      for s, t in spans:
        batch["gold_spans"][i, j, start + s, t - s] = 1.0
  return batch


def answer_text(corpus: Corpus, block_id: int, start: int, end: int) -> str:
  """Cuts a predicted span (body wordpiece indices) out of the original block text."""
  row = corpus.row_of[int(block_id)]
  return corpus.bodies[row][int(corpus.body_starts[row][start]):int(corpus.body_ends[row][end])]
