"""Fitness gates of a synthetic world: is it hard in the ways real Open-QA is hard?

The first world let word overlap solve retrieval (BM25 Recall@5 99.5%, where DPR reports about
60% at k=20 on real NQ), so no effect of the paper could show. These numbers, read from the
world's files alone, say whether a world is worth training on:

- BM25 Recall@k, with ORQA's raw case-sensitive substring matcher over block bodies (the
  CuratedTREC regex matcher for "trec"), beside gold-block recall (the fact's own block, from
  `truth/facts.jsonl`, in the top k). String recall is the higher: any retrieved block that
  happens to contain the answer string (a year, a town another block mentions) counts. That NQ
  and WebQuestions questions are lower case while blocks are cased does not change string
  recall, since the answers (not the questions) are matched, and they keep the corpus's case;
  BM25 lower-cases both sides. Both are also split by question family ("corpus": phrased with
  the corpus's words for the relation; "pretrain": with the pre-training text's words only)
  and, in a world with aliases, by how the question names its subject ("by name", "by alias").
- random Recall@5: the expected string recall of 5 blocks drawn uniformly (exact, not sampled).
- oracle recall: the gold block contains the answer; anything under 100 is a generator bug.
- answer prior: exact match of answering, per relation, the most frequent training answer.
- the share of questions whose answer also occurs in a block about another entity (so that a
  string hit is not proof of the right block), and length statistics, in whitespace words and,
  given a vocabulary, in wordpieces with the model's special tokens counted.
"""
from __future__ import annotations

import collections
import math
from pathlib import Path

import numpy as np

from realm_bench.io_utils import read_jsonl
from realm_bench.tasks import metrics

KS = (5, 20)


def _rows(path: Path) -> list[dict]:
  return [obj for _, obj in read_jsonl(path)]


def _length_stats(lengths: list[int]) -> dict:
  arr = np.asarray(lengths)
  return {"max": int(arr.max()), "p99": float(np.percentile(arr, 99)),
          "mean": round(float(arr.mean()), 2)}


def _percent(hits, total) -> float:
  return round(100.0 * hits / total, 2) if total else float("nan")


def gates(world_dir, *, benchmark: str = "nq", split: str = "dev",
          vocab_path=None) -> dict:
  """The fitness gates of one benchmark split (percentages 0-100). `vocab_path` adds wordpiece
  lengths ([CLS] q [SEP], [CLS] sentence [SEP], [CLS] title [SEP] body [SEP])."""
  from realm_bench.retrieval.bm25 import Bm25Retriever  # pylint: disable=g-import-not-at-top

  root = Path(world_dir)
  regex = benchmark == "trec"
  matcher = "regex" if regex else "string"
  blocks = _rows(root / "corpus/blocks.jsonl")
  body_of = {b["id"]: b["body"] for b in blocks}
  facts = _rows(root / "truth/facts.jsonl")
  owner, family_of, form_of = {}, {}, {}
  for fact in facts:
    for i, q in enumerate(fact["questions"][benchmark]):
      owner[q] = fact
      family_of[q] = fact["question_families"][benchmark][i]
      if "question_subject_forms" in fact:   # a world with aliases
        form_of[q] = fact["question_subject_forms"][benchmark][i]
  questions = _rows(root / f"open_qa/{benchmark}/{split}.jsonl")
  texts = [q["question"] for q in questions]
  answers = [q["answer"] for q in questions]
  gold = [owner[t]["block_id"] for t in texts]

  retriever = Bm25Retriever((b["id"], b["title"], b["body"]) for b in blocks)
  _, top = retriever.search(texts, max(KS))
  out: dict = {"benchmark": benchmark, "split": split, "questions": len(texts),
               "blocks": len(blocks), "matcher": matcher}
  families = sorted(set(family_of[t] for t in texts))
  for k in KS:
    retrieved = [[body_of[int(i)] for i in row[:k] if i >= 0] for row in top]
    out[f"bm25_recall@{k}"] = round(100.0 * metrics.recall_at_k(
        retrieved, answers, k=k, matcher=matcher), 2)
    hits = [g in row[:k] for g, row in zip(gold, top)]
    out[f"bm25_gold_recall@{k}"] = _percent(sum(hits), len(hits))
    for family in families:
      chosen = [h for h, t in zip(hits, texts) if family_of[t] == family]
      out[f"bm25_gold_recall@{k}[{family}]"] = _percent(sum(chosen), len(chosen))
    for form in sorted(set(form_of.values())):
      chosen = [h for h, t in zip(hits, texts) if form_of[t] == form]
      out[f"bm25_gold_recall@{k}[by {form}]"] = _percent(sum(chosen), len(chosen))

  # Which blocks hold each distinct answer list (many questions share one: years, towns).
  holders: dict[tuple, list[int]] = {}
  for a in answers:
    if tuple(a) not in holders:
      holders[tuple(a)] = [i for i, b in enumerate(blocks)
                           if metrics.has_answer(b["body"], a, matcher=matcher)]
  # Expected recall of 5 uniform blocks: 1 - C(n - m, 5) / C(n, 5), m blocks holding an answer.
  n = len(blocks)
  out["random_recall@5"] = _percent(sum(
      1.0 - math.comb(n - len(holders[tuple(a)]), 5) / math.comb(n, 5) for a in answers),
      len(answers))
  out["oracle_recall"] = _percent(sum(metrics.has_answer(body_of[g], a, matcher=matcher)
                                      for g, a in zip(gold, answers)), len(answers))

  # The answer prior: learned from the training split only.
  counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
  for fact in facts:
    if fact["split"] == "train" and fact["questions"][benchmark]:
      counts[fact["relation"]][fact["object"]] += len(fact["questions"][benchmark])
  prior = {r: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for r, c in counts.items()}
  out["answer_prior_em"] = _percent(sum(
      metrics.is_correct(prior.get(owner[t]["relation"], ""), a, regex=regex)
      for t, a in zip(texts, answers)), len(texts))

  out["answer_in_other_entity_block"] = _percent(sum(
      any(blocks[i]["title"] != owner[t]["subject"] for i in holders[tuple(a)])
      for t, a in zip(texts, answers)), len(texts))

  # One span is masked per sentence, uniformly among its spans.
  sentences = _rows(root / "pretrain/sentences.jsonl")
  title_of = {b["id"]: b["title"] for b in blocks}
  subject_spans = all_spans = 0
  subject_masks = 0.0
  for s in sentences:
    is_subject = [s["text"][sp["start"]:sp["end"]] == title_of[s["block_id"]]
                  for sp in s["spans"]]
    subject_spans += sum(is_subject)
    all_spans += len(is_subject)
    subject_masks += sum(is_subject) / len(is_subject)
  out["subject_spans"] = _percent(subject_spans, all_spans)
  out["subject_masks"] = _percent(subject_masks, len(sentences))

  words = {"question": [len(t.split()) for t in texts],
           "sentence": [len(s["text"].split()) for s in sentences],
           "block": [len(b["title"].split()) + len(b["body"].split()) for b in blocks]}
  for what, lengths in words.items():
    out[f"{what}_words"] = _length_stats(lengths)
  if vocab_path is not None:
    from realm_bench.tasks.vocab import get_vocabulary  # pylint: disable=g-import-not-at-top
    encode = get_vocabulary(vocab_path).encode
    pieces = {"question": [len(encode(t)) + 2 for t in texts],
              "sentence": [len(encode(s["text"])) + 2 for s in sentences],
              "block": [len(encode(b["title"])) + len(encode(b["body"])) + 3 for b in blocks]}
    for what, lengths in pieces.items():
      out[f"{what}_wordpieces"] = _length_stats(lengths)
  return out


def format_gates(d: dict) -> str:
  """The gates as a two-column aligned table."""
  lines = []
  width = max(len(k) for k in d)
  for key, value in d.items():
    if isinstance(value, dict):
      value = "  ".join(f"{k} {v}" for k, v in value.items())
    lines.append(f"{key:<{width}}  {value}")
  return "\n".join(lines)
