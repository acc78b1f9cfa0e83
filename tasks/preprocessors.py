"""seqio preprocessors: BERT-style inputs for questions and blocks, and pre-training masks.

Lengths are seqio's `sequence_length`, which the entry functions build from one
`data.SequenceLengths` (macros QUERY_LEN, BLOCK_LEN) that they also hand the model's batching,
so the tasks and the batches cannot disagree: `inputs` is the query budget of the Open-QA and
pre-training tasks and the block budget of the corpus tasks. Each preprocessor cuts text to fit
its budget (a block's body first) and records the cut wordpieces' offsets; seqio's own trimming
then finds nothing to cut. Every preprocessor resolves the vocabulary from the task's `inputs`
feature when the dataset is built, i.e. after gin has named VOCAB_PATH.

Masking is one gin knob, `mask_tokens.strategy` (macro MASKING):
- "salient_span" (REALM): one annotated entity/date span, chosen at random per sentence; every
  wordpiece overlapping its characters becomes [MASK]. Only spans that survive truncation to
  QUERY_LEN are candidates; a sentence with none is dropped.
- "random_token" (BERT): round(rate * n) wordpieces (at least one), chosen uniformly.
- "random_span" (SpanBERT): spans with lengths from a geometric distribution (p=0.2)
  truncated at 10 wordpieces, at uniform positions, until round(rate * n) wordpieces are masked
  (the last span is shortened to hit the budget). Spans count wordpieces, not whole words.
All masked positions become [MASK] (no 80/10/10 replacement: REALM's salient masking does
not use it, and the ablations should differ only in what is masked).

The randomness is stateless: example k of the stream (counting from 0 in file order, before
any sentence is dropped) is masked with the seed (mask_tokens.seed, k). Every reader — the
trainer, a resumed run, `realm-bench tasks` — therefore sees the same masks without having to
pass seqio a seed, and because seqio repeats the source before this preprocessor, a second
epoch continues the count and draws new masks (dynamic masking, as RoBERTa found better).
"""
from __future__ import annotations

import gin
import seqio

from realm_bench.errors import InputError
from realm_bench.tf_runtime import tf  # TensorFlow kept off the accelerators
from realm_bench.tasks import data

MASKING_STRATEGIES = ("salient_span", "random_token", "random_span")
AUTOTUNE = tf.data.AUTOTUNE


def task_vocabulary(output_features):
  """The WordPieceVocabulary behind the task's `inputs` feature (resolved if lazy)."""
  vocab = output_features["inputs"].vocabulary
  return vocab.resolve() if hasattr(vocab, "resolve") else vocab


def _wrap(ids: tf.Tensor, vocab) -> tf.Tensor:
  return tf.concat([[vocab.cls_id], ids, [vocab.sep_id]], axis=0)


def tokenize_query(dataset: tf.data.Dataset, output_features,
                   sequence_length) -> tf.data.Dataset:
  """question -> inputs = [CLS] question [SEP], at most QUERY_LEN ids (not padded)."""
  vocab = task_vocabulary(output_features)
  budget = data.feature_length(sequence_length, "inputs", "Open-QA") - 2

  def fn(ex):
    ex = dict(ex)
    ex["inputs"] = _wrap(vocab.encode_tf(ex["question"])[:budget], vocab)
    return ex

  return dataset.map(fn, num_parallel_calls=AUTOTUNE)


def first_answer_as_targets(dataset: tf.data.Dataset, output_features,
                            sequence_length) -> tf.data.Dataset:
  """answers -> targets_pretokenized = the first gold, targets = its wordpieces (no specials).

  seqio's Evaluator and feature converters expect a `targets` feature; one gold is all a
  sequence can hold, so the full list stays in `answers`, where `qa_postprocess` reads every
  gold back for scoring. Cut to sequence_length["targets"] wordpieces.
  """
  vocab = task_vocabulary(output_features)
  budget = data.feature_length(sequence_length, "targets", "Open-QA")

  def fn(ex):
    ex = dict(ex)
    ex["targets_pretokenized"] = ex["answers"][0]
    ex["targets"] = vocab.encode_tf(ex["answers"][0])[:budget]
    return ex

  return dataset.map(fn, num_parallel_calls=AUTOTUNE)


def tokenize_block(dataset: tf.data.Dataset, output_features,
                   sequence_length) -> tf.data.Dataset:
  """title, body -> inputs = [CLS] title [SEP] body [SEP] within BLOCK_LEN, body cut first.

  `title_ids`/`body_ids` are the kept wordpieces without specials, so the reader's
  `[CLS] q [SEP] title [SEP] body [SEP]` fits QUERY_LEN + BLOCK_LEN; `body_starts`/`body_ends`
  are each kept body wordpiece's character offsets into `body`, to cut answer text back out.
  """
  vocab = task_vocabulary(output_features)
  block_len = data.feature_length(sequence_length, "inputs", "corpus")

  def fn(ex):
    ex = dict(ex)
    title_ids = vocab.encode_tf(ex["title"])[:block_len - 3]
    body_ids, starts, ends = vocab.tokenize_with_offsets_tf(ex["body"])
    keep = block_len - 3 - tf.size(title_ids)
    body_ids, starts, ends = body_ids[:keep], starts[:keep], ends[:keep]
    ex["inputs"] = tf.concat(
        [[vocab.cls_id], title_ids, [vocab.sep_id], body_ids, [vocab.sep_id]], axis=0)
    ex.update(title_ids=title_ids, body_ids=body_ids, body_starts=starts, body_ends=ends)
    return ex

  return dataset.map(fn, num_parallel_calls=AUTOTUNE)


def _mask_count(n: tf.Tensor, rate: float) -> tf.Tensor:
  count = tf.cast(tf.math.round(rate * tf.cast(n, tf.float32)), tf.int32)
  return tf.clip_by_value(count, 1, n)


def _random_token_mask(n, seed, rate):
  count = _mask_count(n, rate)
  positions = tf.math.top_k(tf.random.stateless_uniform([n], seed), k=count).indices
  return tf.scatter_nd(positions[:, None], tf.ones([count], tf.bool), [n])


def _random_span_mask(n, seed, rate, p, max_len):
  budget = _mask_count(n, rate)
  positions = tf.range(n)
  q = 1.0 - p
  # Inverse CDF of the geometric distribution on {1, ..., max_len}, renormalised there.
  top = 1.0 - q ** max_len

  def body(i, mask):
    u = tf.random.stateless_uniform(
        [2], tf.random.experimental.stateless_fold_in(seed, tf.cast(i, tf.int64)))
    length = tf.cast(tf.math.floor(tf.math.log(1.0 - u[0] * top) / tf.math.log(q)), tf.int32) + 1
    remaining = budget - tf.reduce_sum(tf.cast(mask, tf.int32))
    length = tf.clip_by_value(tf.minimum(length, remaining), 1, tf.minimum(max_len, n))
    start = tf.cast(tf.math.floor(u[1] * tf.cast(n - length + 1, tf.float32)), tf.int32)
    start = tf.minimum(start, n - length)
    span = (positions >= start) & (positions < start + length)
    return i + 1, mask | span

  def cond(i, mask):
    del i
    return tf.reduce_sum(tf.cast(mask, tf.int32)) < budget

  # Overlapping spans can stall progress; the cap only bounds pathological draws.
  _, mask = tf.while_loop(cond, body, (tf.constant(0), tf.zeros([n], tf.bool)),
                          maximum_iterations=10 * n + 10)
  return mask


@gin.configurable
def mask_tokens(dataset: tf.data.Dataset, output_features, sequence_length, *,
                strategy: str = "salient_span", rate: float = 0.15,
                span_geometric_p: float = 0.2, max_span_length: int = 10,
                seed: int = 0) -> tf.data.Dataset:
  """text (+ span offsets) -> inputs = [CLS] masked text [SEP], targets = originals at masks.

  `targets` has the length of `inputs`, the original id at masked positions and 0 elsewhere
  (PAD: not predicted). Sentences longer than QUERY_LEN - 2 wordpieces are cut at the end.
  """
  if strategy not in MASKING_STRATEGIES:
    raise InputError(f"unknown masking strategy {strategy!r} (MASKING / mask_tokens.strategy); "
                     f"expected one of {', '.join(MASKING_STRATEGIES)}")
  if not 0.0 < rate <= 1.0:
    raise InputError(f"mask_tokens.rate must be in (0, 1], got {rate}")
  if not 0.0 < span_geometric_p < 1.0 or max_span_length < 1:
    raise InputError("mask_tokens needs 0 < span_geometric_p < 1 and max_span_length >= 1, got "
                     f"{span_geometric_p} and {max_span_length}")
  vocab = task_vocabulary(output_features)
  budget = data.feature_length(sequence_length, "inputs", "pre-training") - 2

  def tokenize(index, ex):
    ids, starts, ends = vocab.tokenize_with_offsets_tf(ex["text"])
    out = {"ids": ids[:budget], "block_id": ex["block_id"],
           "seed": tf.stack([tf.constant(seed, tf.int64), index])}
    if strategy == "salient_span":
      # covers[s, i]: wordpiece i overlaps span s's characters.
      covers = ((starts[None, :] < ex["span_ends"][:, None])
                & (ends[None, :] > ex["span_starts"][:, None]))
      cut = tf.range(tf.size(ids)) >= budget
      out["eligible"] = (tf.reduce_any(covers, axis=1)
                         & ~tf.reduce_any(covers & cut[None, :], axis=1))
      out["covers"] = covers[:, :budget]
    return out

  def keep(ex):
    if strategy == "salient_span":
      return tf.reduce_any(ex["eligible"])
    return tf.size(ex["ids"]) > 0

  def mask(ex):
    ids, example_seed = ex["ids"], ex["seed"]
    n = tf.size(ids)
    if strategy == "salient_span":
      candidates = tf.where(ex["eligible"])[:, 0]
      pick = tf.random.stateless_uniform([], example_seed, minval=0,
                                         maxval=tf.size(candidates, out_type=tf.int32),
                                         dtype=tf.int32)
      masked = tf.gather(ex["covers"], candidates[pick])
    elif strategy == "random_token":
      masked = _random_token_mask(n, example_seed, rate)
    else:
      masked = _random_span_mask(n, example_seed, rate, span_geometric_p, max_span_length)
    return {
        "inputs": _wrap(tf.where(masked, vocab.mask_id, ids), vocab),
        "targets": tf.concat([[0], tf.where(masked, ids, 0), [0]], axis=0),
        "block_id": ex["block_id"],
    }

  dataset = dataset.enumerate().map(tokenize, num_parallel_calls=AUTOTUNE).filter(keep)
  return dataset.map(mask, num_parallel_calls=AUTOTUNE)


def token_feature() -> seqio.Feature:
  """An int32 wordpiece sequence in the gin-chosen vocabulary; BERT has no EOS to append."""
  from realm_bench.tasks.vocab import LazyVocabulary  # pylint: disable=g-import-not-at-top
  return seqio.Feature(vocabulary=LazyVocabulary(), add_eos=False, dtype=tf.int32)


def int_feature(rank: int) -> seqio.Feature:
  """An int32 feature that is not text (ids, offsets), declared so seqio checks its rank."""
  return seqio.Feature(vocabulary=seqio.PassThroughVocabulary(size=0), add_eos=False,
                       dtype=tf.int32, rank=rank)
