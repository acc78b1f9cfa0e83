"""Open-QA metrics with the official ORQA evaluation's semantics, without TensorFlow.

Reported Open-QA numbers are only comparable when every edge case is decided the way the
released evaluation decides it, so each choice here follows ORQA's `eval_utils` (exact match,
CuratedTREC regex match) or DPR's `qa_validation` (the token matcher offered for Recall@k):

- exact match: NFD, lowercase, drop ASCII punctuation, drop the whole words a/an/the, collapse
  whitespace, then compare with every gold. NFD keeps combining marks, so "café" != "cafe",
  while NFC and NFD spellings of the same word are equal. Curly quotes and dashes are not in
  `string.punctuation`, so they survive.
- regex match (CuratedTREC): `re.match` at the start of the raw prediction with
  IGNORECASE|UNICODE|MULTILINE; a prefix counts; a pattern that does not compile scores wrong.
- an empty gold list is an error (the official code fails on it too, on `max([])`): scoring it
  silently as wrong would hide a broken reference file.

Stdlib only, so the `score` command and the run-record aggregator never load TensorFlow.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import string
import unicodedata
from typing import Any, Sequence

REGEX_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE

# Recall@k matchers. "string" is the released ORQA/REALM rule (raw, case-sensitive substring of
# the block text); "regex" is its CuratedTREC counterpart; "dpr" is DPR's normalised token
# matcher (which DPR itself calls "string").
RECALL_MATCHERS = ("string", "regex", "dpr")

# The example feature holding the gold answers, read by `qa_postprocess` for targets.
ANSWERS_FEATURE = "answers"

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
  """The official normalisation, in the official order (articles go after punctuation)."""
  s = unicodedata.normalize("NFD", s).lower()
  s = "".join(ch for ch in s if ch not in _PUNCTUATION)
  s = _ARTICLES.sub(" ", s)
  return " ".join(s.split())


def _check_golds(answers: Sequence[str]) -> None:
  # A bare string would be iterated character by character and score nonsense.
  if isinstance(answers, (str, bytes)):
    raise TypeError(f"gold answers must be a list of strings, got the string {answers!r}")
  if len(answers) == 0:
    raise ValueError("empty gold answer list: every question needs at least one gold answer")


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern | None:
  """Compiled pattern, or None when it does not compile (which the official code scores wrong)."""
  try:
    return re.compile(pattern, REGEX_FLAGS)
  except re.error:
    return None


def exact_match(prediction: str, answers: Sequence[str]) -> bool:
  """True when the normalised prediction equals any normalised gold."""
  _check_golds(answers)
  normalized = normalize_answer(prediction)
  return any(normalized == normalize_answer(gold) for gold in answers)


def regex_match(prediction: str, patterns: Sequence[str]) -> bool:
  """True when any pattern matches at the start of the raw prediction (CuratedTREC)."""
  _check_golds(patterns)
  for pattern in patterns:
    compiled = _compile(pattern)
    if compiled is not None and compiled.match(prediction) is not None:
      return True
  return False


def is_correct(prediction: str, answers: Sequence[str], *, regex: bool = False) -> bool:
  return regex_match(prediction, answers) if regex else exact_match(prediction, answers)


def pattern_compiles(pattern: str) -> bool:
  """Lets reports count patterns that can never match instead of silently scoring them wrong."""
  return _compile(pattern) is not None


@dataclasses.dataclass(frozen=True)
class Score:
  """A count of correct questions; the percentage is derived so the two can never disagree."""
  num_correct: int
  num_total: int

  def __post_init__(self):
    if self.num_total <= 0:
      raise ValueError("a score needs at least one question")
    if not 0 <= self.num_correct <= self.num_total:
      raise ValueError(f"num_correct={self.num_correct} outside [0, {self.num_total}]")

  @property
  def exact_match_percent(self) -> float:
    return 100.0 * self.num_correct / self.num_total


def score(predictions: Sequence[str], targets: Sequence[Sequence[str]], *,
          regex: bool = False) -> Score:
  """Scores aligned predictions against their gold lists, one question each."""
  if len(predictions) != len(targets):
    raise ValueError(f"{len(predictions)} predictions for {len(targets)} targets")
  correct = sum(is_correct(p, golds, regex=regex) for p, golds in zip(predictions, targets))
  return Score(num_correct=correct, num_total=len(targets))


def by_question(rows: Sequence[dict]) -> list[dict]:
  """One row per distinct `question`, as the official evaluation counts: it keys references
  and predictions by question text, so a question repeated in a split (CuratedTREC's test file
  has one) is scored once, with its last answer list and last prediction. Rows stay in the
  order their question first appears, so per-question outcomes of two runs line up."""
  latest: dict[str, dict] = {}
  for row in rows:
    latest[row["question"]] = row   # a repeated key keeps its first position
  return list(latest.values())


# seqio metric functions: fn(targets, predictions) -> {name: value}.


def exact_match_metric(targets: Sequence[Sequence[str]],
                       predictions: Sequence[str]) -> dict[str, float]:
  """Official exact match as a percentage (0-100), the unit of the paper's tables."""
  return {"exact_match": score(predictions, targets).exact_match_percent}


def regex_match_metric(targets: Sequence[Sequence[str]],
                       predictions: Sequence[str]) -> dict[str, float]:
  """CuratedTREC's score, reported under "exact_match" because it fills that table column."""
  return {"exact_match": score(predictions, targets, regex=True).exact_match_percent}


def to_text(value: Any) -> str:
  """A seqio/numpy string feature (bytes, numpy scalar or str) as text."""
  if isinstance(value, bytes):
    return value.decode("utf-8")
  if hasattr(value, "item") and not isinstance(value, str):  # a numpy scalar
    return to_text(value.item())
  return str(value)


def qa_postprocess(output_or_target: Any, example: dict | None = None,
                   is_target: bool = False) -> str | list[str]:
  """seqio postprocess_fn: targets become the example's full gold list, predictions text.

  The decoded target holds only one answer, but a question is correct when any gold matches,
  so targets are taken from the example's `answers` feature when it is there.
  """
  if not is_target:
    return to_text(output_or_target)
  if example is not None and ANSWERS_FEATURE in example:
    answers = example[ANSWERS_FEATURE]
    if hasattr(answers, "tolist"):
      answers = answers.tolist()
    if isinstance(answers, (str, bytes)):
      answers = [answers]
    return [to_text(a) for a in answers]
  return [to_text(output_or_target)]


# Recall@k.


def dpr_tokens(text: str) -> list[str]:
  """DPR's SimpleTokenizer: runs of letters/numbers/marks, or any other single visible char.

  Separators (Z*) and control/format/unassigned characters (C*) are dropped, as in DPR's
  pattern `[\\p{L}\\p{N}\\p{M}]+|[^\\p{Z}\\p{C}]`, written with unicodedata so that no
  third-party `regex` module is needed.
  """
  tokens, run = [], []
  for ch in text:
    kind = unicodedata.category(ch)[0]
    if kind in "LNM":
      run.append(ch)
      continue
    if run:
      tokens.append("".join(run))
      run = []
    if kind not in "ZC":
      tokens.append(ch)
  if run:
    tokens.append("".join(run))
  return tokens


def _dpr_words(text: str) -> list[str]:
  return [t.lower() for t in dpr_tokens(unicodedata.normalize("NFD", text))]


def _contains_sequence(haystack: list[str], needle: list[str]) -> bool:
  # An empty needle is found everywhere, as in DPR (an answer with no tokens hits every block).
  n = len(needle)
  return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def has_answer(block_text: str, answers: Sequence[str], *, matcher: str = "string") -> bool:
  """Whether a retrieved block counts as containing an answer, under the named matcher."""
  _check_golds(answers)
  if matcher == "string":
    return any(answer in block_text for answer in answers)
  if matcher == "regex":
    for pattern in answers:
      compiled = _compile(pattern)
      if compiled is not None and compiled.search(block_text) is not None:
        return True
    return False
  if matcher == "dpr":
    words = _dpr_words(block_text)
    return any(_contains_sequence(words, _dpr_words(answer)) for answer in answers)
  raise ValueError(f"unknown recall matcher {matcher!r}; expected one of {RECALL_MATCHERS}")


def recall_at_k(retrieved_texts: Sequence[Sequence[str]], answers_list: Sequence[Sequence[str]],
                *, k: int, matcher: str = "string") -> float:
  """Fraction in [0, 1] of questions with a hit among their first k retrieved blocks.

  A question with fewer than k blocks is judged on the blocks it has.
  """
  if isinstance(k, bool) or not isinstance(k, int) or k < 1:
    raise ValueError(f"k must be a positive integer, got {k!r}")
  if matcher not in RECALL_MATCHERS:
    raise ValueError(f"unknown recall matcher {matcher!r}; expected one of {RECALL_MATCHERS}")
  if len(retrieved_texts) != len(answers_list):
    raise ValueError(f"{len(retrieved_texts)} retrieval lists for {len(answers_list)} questions")
  if not answers_list:
    raise ValueError("recall needs at least one question")
  for answers in answers_list:
    _check_golds(answers)
  hits = sum(
      any(has_answer(block, answers, matcher=matcher) for block in blocks[:k])
      for blocks, answers in zip(retrieved_texts, answers_list))
  return hits / len(answers_list)


class RecallAtK:
  """Recall@k as a seqio metric function: (targets, predictions) -> {"recall@k": percent}.

  targets: each question's gold list (what `qa_postprocess` gives seqio); predictions: each
  question's retrieved block texts, best first. A percentage, like the exact match beside it.
  A class rather than a closure so that seqio sees the two-argument signature and it pickles.
  """

  def __init__(self, k: int, matcher: str = "string"):
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
      raise ValueError(f"k must be a positive integer, got {k!r}")
    if matcher not in RECALL_MATCHERS:
      raise ValueError(f"unknown recall matcher {matcher!r}; expected one of {RECALL_MATCHERS}")
    self.k, self.matcher = k, matcher
    self.__name__ = f"recall_at_{k}"

  def __call__(self, targets: Sequence[Sequence[str]],
               predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    blocks = [[to_text(b) for b in p] for p in predictions]
    return {f"recall@{self.k}": 100.0 * recall_at_k(blocks, targets, k=self.k,
                                                    matcher=self.matcher)}

  def __repr__(self):
    return f"RecallAtK(k={self.k}, matcher={self.matcher!r})"
