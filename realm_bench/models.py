"""REALM's models behind the t5x-style `BaseModel` interface.

The models share building blocks and parameter names, so each stage warm-starts the next by
copying subtrees ("retriever", "reader", "mlm_head"; see `warm_start`):
  MlmModel            -> the BERT stage (masked LM over the pre-training text), whose encoder
                         warm-starts every reader and the ICT retriever; fine-tuned on questions
                         with the answer masked, it is also the closed-book model;
  IctModel            -> ORQA's inverse cloze task, the retriever's warm start;
  RealmPretrainModel  -> REALM's retrieval-augmented masked LM (Guu et al. 2020, eq. 1-3);
  OpenQAModel         -> ORQA's fine-tuning procedure, used for REALM, ORQA and the ablations.

Retrieval scores: the paper and the released code use the raw inner product f(x, z). A
LayerNorm'ed 128-d embedding makes that ~100 at the top, which swamps a small reader's span
logits (ORQA adds the score to every span) and makes p(z|x) one-hot from the first step;
`score_scale` multiplies the inner product (1/sqrt(d) is the usual choice) and
`learn_score_scale` turns the multiplier into a learned temperature. 1.0 and False are the
paper's setting.

Retrieval itself (MIPS over a possibly stale index) happens on the host between steps: the batch
carries the *selected* candidates, and their scores are recomputed here with the current
parameters, which is how gradients reach the retriever.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp
import numpy as np

from realm_bench.errors import InputError
from realm_bench.models_base import BaseModel
from realm_bench.networks.bert import BertConfig, BertEncoder, MlmHead, Projection
from realm_bench.networks.embedder import Retriever, inner_products
from realm_bench.networks.reader import NEG_INF, SpanHead, span_validity
from realm_bench.objectives import (marginal_span_log_likelihood, realm_log_likelihood,
                                    realm_loss_sharpened_posterior, source_block_masses, with_null_prior)

Batch = Mapping[str, Any]


def _train_mode(dropout_rng) -> dict:
  """apply() arguments: dropout on when a training step passes its RNG, off otherwise."""
  if dropout_rng is None:
    return {}
  return {"deterministic": False, "rngs": {"dropout": dropout_rng}}


def _masked_mean(values, mask):
  mask = mask.astype(jnp.float32)
  return jnp.sum(values * mask) / jnp.maximum(jnp.sum(mask), 1.0)


# ------------------------------------------------------------------------------------------
# Networks.
# ------------------------------------------------------------------------------------------

class IctNet(nn.Module):
  retriever_config: BertConfig
  proj_dim: int
  share_embedders: bool
  doc_sep_id: int | None = None
  projection_norm_eps: float | None = None

  def setup(self):
    self.retriever = Retriever(self.retriever_config, self.proj_dim, self.share_embedders,
                               self.doc_sep_id, self.projection_norm_eps)

  def __call__(self, query_ids, doc_ids, *, deterministic=True):
    return self.retriever(query_ids, doc_ids, deterministic=deterministic)

  def embed_query(self, ids):
    return self.retriever.embed_query(ids)

  def embed_docs(self, ids):
    return self.retriever.embed_docs(ids)


class MlmNet(nn.Module):
  """A BERT encoder with its masked-LM head, named as REALM's reader so it warm-starts one;
  `next_sentence` adds BERT's next-sentence head on the pooled [CLS] (its logits returned too)."""
  config: BertConfig
  next_sentence: bool = False

  def setup(self):
    self.reader = BertEncoder(self.config)
    self.mlm_head = MlmHead(self.config)
    if self.next_sentence:
      self.next_sentence_head = Projection(self.config, (2,), ("embed", None))

  def __call__(self, input_ids, mlm_positions, input_types=None, *, deterministic=True):
    hidden, pooled = self.reader(input_ids, input_types, deterministic=deterministic)
    picked = jnp.take_along_axis(hidden, mlm_positions[..., None], axis=1)
    logits = self.mlm_head(picked, self.reader)
    if not self.next_sentence:
      return logits
    return logits, self.next_sentence_head(pooled)


class _ScoredNet(IctNet):
  """A retriever whose scores may carry a learned log-scale (`score_log_scale`)."""
  score_scale: float = 1.0
  learn_score_scale: bool = False

  def setup(self):
    super().setup()
    if self.learn_score_scale:
      self.score_log_scale = self.param(
          "score_log_scale", nn.initializers.constant(float(np.log(self.score_scale))), (),
          jnp.float32)

  def log_scale(self):
    if self.learn_score_scale:
      return self.score_log_scale
    return jnp.log(jnp.float32(self.score_scale))


class RealmPretrainNet(_ScoredNet):
  reader_config: BertConfig = None

  def setup(self):
    super().setup()
    self.reader = BertEncoder(self.reader_config)
    self.mlm_head = MlmHead(self.reader_config)

  def __call__(self, query_ids, cand_doc_ids, joint_ids, joint_types, mlm_positions, *,
               deterministic=True):
    q, d = self.retriever(query_ids, cand_doc_ids, deterministic=deterministic)
    hidden, _ = self.reader(joint_ids, joint_types, deterministic=deterministic)
    # Masked positions are the same in every candidate: the query comes first.
    positions = jnp.broadcast_to(mlm_positions[:, None, :],
                                 hidden.shape[:2] + mlm_positions.shape[-1:])
    picked = jnp.take_along_axis(hidden, positions[..., None], axis=2)
    scores = _scaled(inner_products(q, d), self.log_scale(), self.score_scale,
                     self.learn_score_scale)
    return scores, self.mlm_head(picked, self.reader)


class OpenQANet(_ScoredNet):
  reader_config: BertConfig = None
  span_hidden: int = 256
  max_span_len: int = 10
  span_layer_norm: bool = True
  span_norm_eps: float = 1e-3

  def setup(self):
    super().setup()
    self.reader = BertEncoder(self.reader_config)
    self.span_head = SpanHead(self.reader_config, self.span_hidden, self.max_span_len,
                              self.span_layer_norm, self.span_norm_eps)

  def __call__(self, query_ids, reader_ids, reader_types, body_positions, *, deterministic=True):
    q = self.retriever.embed_query(query_ids, deterministic=deterministic)
    hidden, _ = self.reader(reader_ids, reader_types, deterministic=deterministic)
    return q, self.span_head(hidden, body_positions), self.log_scale()


def _scaled(scores, log_scale, scale: float, learned: bool):
  """Raw inner products stay bit-identical at the paper's setting (no multiply by 1.0)."""
  if not learned and scale == 1.0:
    return scores
  return scores * jnp.exp(log_scale)


# ------------------------------------------------------------------------------------------
# Models.
# ------------------------------------------------------------------------------------------

@gin.configurable
@dataclasses.dataclass
class MlmModel(BaseModel):
  """BERT's masked LM: the BERT stage, and (on questions with the answer masked) closed-book QA.

  Batch: `pipelines.batching.MLM_BATCH`. `vocabulary` sizes the embeddings when the config's
  vocab_size is 0, as for the retriever models.

  `next_sentence_weight` > 0 adds BERT-base's next-sentence loss (batches then carry
  `next_is_random`). It trains the pooled [CLS] the retriever towers read, yet ICT from such
  a BERT stage does worse (experiment log E67), so the quickstart leaves it off.
  """
  config: BertConfig
  vocabulary: Any = None
  next_sentence_weight: float = 0.0

  def __post_init__(self):
    if self.config.vocab_size == 0:
      if self.vocabulary is None:
        raise ValueError("MlmModel.config.vocab_size is 0 and no vocabulary is given")
      self.config = dataclasses.replace(self.config, vocab_size=self.vocabulary.vocab_size)

  def _net(self):
    if not self.next_sentence_weight >= 0.0:
      raise InputError(f"must be at least 0, got {self.next_sentence_weight!r}",
                       field="MlmModel.next_sentence_weight")
    return MlmNet(self.config, next_sentence=self.next_sentence_weight > 0)

  def init_params(self, rng, batch):
    return self._net().init({"params": rng}, batch["input_ids"], batch["mlm_positions"])["params"]

  def _apply(self, params, batch, dropout_rng=None):
    """(masked-LM logits, next-sentence logits or None)."""
    out = self._net().apply({"params": params}, batch["input_ids"], batch["mlm_positions"],
                            batch.get("input_types"), **_train_mode(dropout_rng))
    return out if self.next_sentence_weight > 0 else (out, None)

  @staticmethod
  def _target_log_probs(logits, targets):
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    return jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]

  def loss_fn(self, params, batch, dropout_rng):
    if self.next_sentence_weight > 0 and "next_is_random" not in batch:
      raise InputError("next_sentence_weight > 0 needs batches with next_is_random (the BERT "
                       "stage with pair_restatements and a negative_rate)",
                       field="MlmModel.next_sentence_weight")
    logits, nsp_logits = self._apply(params, batch, dropout_rng)
    token_log_probs = self._target_log_probs(logits, batch["mlm_targets"])
    weights = batch["mlm_weights"]
    loss = -jnp.sum(token_log_probs * weights) / jnp.maximum(jnp.sum(weights), 1.0)
    correct = (jnp.argmax(logits, axis=-1) == batch["mlm_targets"]).astype(jnp.float32)
    metrics = {"mlm_accuracy": _masked_mean(correct, weights > 0)}
    if nsp_logits is not None:
      labels, paired = batch["next_is_random"], batch["next_sentence_weights"]
      nsp_loss = -_masked_mean(self._target_log_probs(nsp_logits, labels), paired)
      loss = loss + self.next_sentence_weight * nsp_loss
      metrics["next_sentence_loss"] = nsp_loss
      metrics["next_sentence_accuracy"] = _masked_mean(
          (jnp.argmax(nsp_logits, -1) == labels).astype(jnp.float32), paired)
    return loss, metrics

  def predict_batch(self, params, batch):
    logits, _ = self._apply(params, batch)
    return {"tokens": jnp.argmax(logits, axis=-1)}

  def score_batch(self, params, batch):
    logits, _ = self._apply(params, batch)
    token_log_probs = self._target_log_probs(logits, batch["mlm_targets"])
    return jnp.sum(token_log_probs * batch["mlm_weights"], axis=-1)


@dataclasses.dataclass
class _RetrieverModel(BaseModel):
  """Common retriever plumbing: the towers, corpus and query embedding for the index.

  `vocabulary` (a seqio vocabulary, as t5x models carry theirs) sizes the embeddings when a
  config's vocab_size is 0 (the gin default), and gives the pipelines their special ids.

  `separate_doc_segments`: documents get REALM's segment ids, title 0 and body 1
  (`networks.embedder.document_segment_ids`, split at the [SEP] id `sep_id`, the vocabulary's
  when None); False gives them one segment, as this project did before.
  `projection_norm_eps`: the towers' output LayerNorm epsilon (None: the encoder's, REALM's
  1e-12; ORQA's ICT module used 1e-3).
  """
  retriever_config: BertConfig
  proj_dim: int = 128
  share_embedders: bool = True
  vocabulary: Any = None
  separate_doc_segments: bool = True
  sep_id: int | None = None
  projection_norm_eps: float | None = None

  def __post_init__(self):
    for name in ("retriever_config", "reader_config"):
      config = getattr(self, name, None)
      if config is not None and config.vocab_size == 0:
        if self.vocabulary is None:
          raise ValueError(f"{type(self).__name__}.{name}.vocab_size is 0 and no vocabulary "
                           "is given to size it")
        setattr(self, name, dataclasses.replace(config, vocab_size=self.vocabulary.vocab_size))
    if self.separate_doc_segments and self.sep_id is None:
      if self.vocabulary is None:
        raise ValueError(f"{type(self).__name__} segments documents at [SEP] "
                         "(separate_doc_segments) but has no vocabulary or sep_id to find it")
      self.sep_id = int(self.vocabulary.sep_id)

  def _retriever_fields(self) -> dict:
    """The retriever networks' constructor arguments this model fixes."""
    return {"retriever_config": self.retriever_config, "proj_dim": self.proj_dim,
            "share_embedders": self.share_embedders,
            "doc_sep_id": self.sep_id if self.separate_doc_segments else None,
            "projection_norm_eps": self.projection_norm_eps}

  def _net(self) -> IctNet:
    return IctNet(**self._retriever_fields())

  def embed_docs(self, params, doc_ids):
    return self._net().apply({"params": params}, doc_ids, method="embed_docs")

  def embed_queries(self, params, query_ids):
    return self._net().apply({"params": params}, query_ids, method="embed_query")


@gin.configurable
@dataclasses.dataclass
class IctModel(_RetrieverModel):
  """ORQA's inverse cloze task: a sentence must retrieve its own block among the batch's.

  Batch: `pipelines.batching.ICT_BATCH`.

  `score_scale` (see above) scales the in-batch logits of training only; 1/sqrt(128) changed
  neither how often ICT fails nor how well it works (experiment log E66).
  """
  score_scale: float = 1.0

  def init_params(self, rng, batch):
    return self._net().init({"params": rng}, batch["query_ids"], batch["doc_ids"])["params"]

  def loss_fn(self, params, batch, dropout_rng):
    q, d = self._net().apply({"params": params}, batch["query_ids"], batch["doc_ids"],
                             deterministic=False, rngs={"dropout": dropout_rng})
    logits = self.score_scale * (q @ d.T)
    labels = jnp.arange(q.shape[0])
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    loss = -jnp.mean(log_probs[labels, labels])
    accuracy = jnp.mean(jnp.argmax(logits, axis=-1) == labels)
    return loss, {"ict_accuracy": accuracy}

  def predict_batch(self, params, batch):
    q, d = self._net().apply({"params": params}, batch["query_ids"], batch["doc_ids"])
    return {"best_doc": jnp.argmax(q @ d.T, axis=-1)}

  def score_batch(self, params, batch):
    q, d = self._net().apply({"params": params}, batch["query_ids"], batch["doc_ids"])
    return jnp.sum(q * d, axis=-1)


@gin.configurable
@dataclasses.dataclass
class RealmPretrainModel(_RetrieverModel):
  """Retrieval-augmented masked LM; candidate 0 of every example is the null document.

  Batch: `pipelines.batching.REALM_BATCH`.
  """
  reader_config: BertConfig = None
  # False: p(y|z,x) is the product over the masked tokens, the paper's eq. (2), what the
  # tables' REALM rows use. True: each masked token marginalised over z on its own, as the
  # released REALM code and Hugging Face's RealmKnowledgeAugEncoder compute the loss.
  per_mask_marginal: bool = False
  score_scale: float = 1.0
  learn_score_scale: bool = False
  null_prior: float | None = None   # None: scored like a block (the paper); see with_null_prior
  # 1.0: REALM's gradient (the paper). Above 1, the retriever's target posterior is sharpened
  # towards the reader's favourite block; see objectives.realm_loss_sharpened_posterior.
  posterior_power: float = 1.0

  def _pretrain_net(self):
    if self.null_prior is not None and not 0.0 < self.null_prior < 1.0:
      raise InputError(f"must be in (0, 1) or None, got {self.null_prior!r}",
                       field="RealmPretrainModel.null_prior")
    if not self.posterior_power >= 1.0:
      raise InputError(f"must be at least 1, got {self.posterior_power!r}",
                       field="RealmPretrainModel.posterior_power")
    if self.posterior_power != 1.0 and self.per_mask_marginal:
      raise InputError("a sharpened posterior needs p(y|z,x) of the whole span "
                       "(per_mask_marginal = False)", field="RealmPretrainModel.posterior_power")
    return RealmPretrainNet(**self._retriever_fields(), score_scale=self.score_scale,
                            learn_score_scale=self.learn_score_scale,
                            reader_config=self.reader_config)

  def init_params(self, rng, batch):
    return self._pretrain_net().init(
        {"params": rng}, batch["query_ids"], batch["cand_doc_ids"], batch["joint_ids"],
        batch["joint_types"], batch["mlm_positions"])["params"]

  def _forward(self, params, batch, dropout_rng=None):
    kwargs = _train_mode(dropout_rng)
    scores, logits = self._pretrain_net().apply(
        {"params": params}, batch["query_ids"], batch["cand_doc_ids"], batch["joint_ids"],
        batch["joint_types"], batch["mlm_positions"], **kwargs)
    log_probs = jax.nn.log_softmax(logits, axis=-1)
    targets = batch["mlm_targets"]
    token_log_probs = jnp.take_along_axis(
        log_probs, jnp.broadcast_to(targets[:, None, :, None],
                                    log_probs.shape[:3] + (1,)), axis=-1)[..., 0]
    return scores, token_log_probs

  def loss_fn(self, params, batch, dropout_rng):
    scores, token_log_probs = self._forward(params, batch, dropout_rng)
    weights = batch["mlm_weights"]
    valid = batch["cand_valid"] > 0
    if self.null_prior is not None:
      scores = with_null_prior(scores, valid, self.null_prior)
    log_lik = realm_log_likelihood(scores, token_log_probs, weights, valid,
                                   per_mask=self.per_mask_marginal)
    num_masks = jnp.maximum(jnp.sum(weights), 1.0)
    if self.posterior_power == 1.0:
      loss = -jnp.sum(log_lik) / num_masks
    else:
      loss = jnp.sum(realm_loss_sharpened_posterior(
          scores, token_log_probs, weights, valid,
          posterior_power=self.posterior_power)) / num_masks
    metrics = self._metrics(scores, token_log_probs, weights, valid, log_lik, num_masks)
    if "cand_is_source" in batch:
      metrics.update(source_block_masses(scores, token_log_probs, weights, valid,
                                         batch["cand_is_source"] > 0))
    return loss, metrics

  def _metrics(self, scores, token_log_probs, weights, valid, log_lik, num_masks):
    seq_log_probs = jnp.sum(token_log_probs * weights[:, None, :], axis=-1)  # [B, K]
    null = seq_log_probs[:, 0]
    # Candidate 1 is the best retrieved document (the host keeps MIPS order).
    top = seq_log_probs[:, 1] if seq_log_probs.shape[1] > 1 else null
    marginal = log_lik if log_lik.ndim == 1 else jnp.sum(log_lik, axis=-1)
    p_z = jax.nn.softmax(jnp.where(valid, scores, NEG_INF), axis=-1)
    return {
        # RU = log p(y|z,x) - log p(y|null,x), per masked token, for the top document...
        "retrieval_utility": jnp.sum(top - null) / num_masks,
        # ...and for the marginal over all candidates, as the released code logs it.
        "marginal_retrieval_utility": jnp.sum(marginal - null) / num_masks,
        "null_doc_prob": jnp.mean(p_z[:, 0]),
    }

  def predict_batch(self, params, batch):
    scores, token_log_probs = self._forward(params, batch)
    return {"retrieval_scores": scores, "token_log_probs": token_log_probs}

  def score_batch(self, params, batch):
    scores, token_log_probs = self._forward(params, batch)
    valid = batch["cand_valid"] > 0
    if self.null_prior is not None:
      scores = with_null_prior(scores, valid, self.null_prior)
    return realm_log_likelihood(scores, token_log_probs, batch["mlm_weights"], valid)


@gin.configurable
@dataclasses.dataclass
class OpenQAModel(_RetrieverModel):
  """ORQA fine-tuning: frozen document embeddings, trained query tower and span reader.

  Batch: `pipelines.batching.OPEN_QA_BATCH` (the larger retrieved set's frozen embeddings,
  the reader inputs of its first blocks, gold spans when training).
  """
  reader_config: BertConfig = None
  span_hidden: int = 256
  max_span_len: int = 10
  score_scale: float = 1.0
  learn_score_scale: bool = False
  # ORQA's span head: ReLU -> LayerNorm(1e-3) -> score; False: the old head (networks/reader.py).
  span_layer_norm: bool = True
  span_norm_eps: float = 1e-3
  # The retrieval score's weight in its spans' logits: 1 is ORQA's, 0 the reader alone (E93).
  span_retrieval_weight: float = 1.0

  def _qa_net(self):
    return OpenQANet(**self._retriever_fields(), score_scale=self.score_scale,
                     learn_score_scale=self.learn_score_scale, reader_config=self.reader_config,
                     span_hidden=self.span_hidden, max_span_len=self.max_span_len,
                     span_layer_norm=self.span_layer_norm, span_norm_eps=self.span_norm_eps)

  def init_params(self, rng, batch):
    return self._qa_net().init({"params": rng}, batch["query_ids"], batch["reader_ids"],
                               batch["reader_types"], batch["body_positions"])["params"]

  def _forward(self, params, batch, dropout_rng=None):
    q, span_logits, log_scale = self._qa_net().apply(
        {"params": params}, batch["query_ids"], batch["reader_ids"], batch["reader_types"],
        batch["body_positions"], **_train_mode(dropout_rng))
    retrieval_scores = _scaled(inner_products(q, batch["retrieved_doc_emb"]), log_scale,
                               self.score_scale, self.learn_score_scale)      # [B, N]
    num_read = batch["reader_ids"].shape[1]
    # A block's retrieval score is added to each of its spans (ORQA), weighted.
    span_logits += self.span_retrieval_weight * retrieval_scores[:, :num_read, None, None]
    valid = span_validity(span_logits.shape[-2], self.max_span_len,
                          jnp.zeros_like(batch["body_len"]), batch["body_len"])
    return retrieval_scores, span_logits, valid

  def loss_fn(self, params, batch, dropout_rng):
    scores, span_logits, valid = self._forward(params, batch, dropout_rng)
    reader_ll, reader_has = marginal_span_log_likelihood(
        span_logits, batch["gold_spans"] > 0, valid)
    retrieved_valid = batch["retrieved_valid"] > 0
    retriever_ll, retriever_has = marginal_span_log_likelihood(
        scores, (batch["retrieved_has_answer"] > 0) & retrieved_valid, retrieved_valid)
    reader_loss = -_masked_mean(reader_ll, reader_has)
    retriever_loss = -_masked_mean(retriever_ll, retriever_has)
    return reader_loss + retriever_loss, {
        "reader_loss": reader_loss,
        "retriever_loss": retriever_loss,
        "gold_in_read_blocks": jnp.mean(reader_has),
        "answer_in_retrieved": jnp.mean(retriever_has),
    }

  def predict_batch(self, params, batch):
    """The best (block, body start, body end) over the read blocks, retrieval score included."""
    _, span_logits, valid = self._forward(params, batch)
    logits = jnp.where(valid, span_logits, NEG_INF)
    b, r, l, w = logits.shape
    best = jnp.argmax(logits.reshape(b, -1), axis=-1)
    block, rest = jnp.divmod(best, l * w)
    start, width = jnp.divmod(rest, w)
    return {"block": block, "start": start, "end": start + width,
            "score": jnp.max(logits.reshape(b, -1), axis=-1),
            "has_span": jnp.any(valid.reshape(b, -1), axis=-1)}

  def score_batch(self, params, batch):
    scores, _, _ = self._forward(params, batch)
    return scores
