"""REALM's and ORQA's objectives as pure functions of scores and log-probabilities.

The models (`models.py`) call these; the tests compare them with direct computations, so the
maths can be read and checked without a network.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from realm_bench.networks.reader import NEG_INF


def masked_log_softmax(scores, valid):
  return jax.nn.log_softmax(jnp.where(valid, scores, NEG_INF), axis=-1)


def with_null_prior(retrieval_scores, candidate_valid, null_prior: float):
  """Log-priors with the null document (candidate 0) fixed at `null_prior` and the retrieved
  candidates sharing the rest by their scores.

  REALM scores the null document like any block; when its score is far below the retrieved
  ones (null_doc_prob ~1e-3 here) it cannot be the sink that "no block helps" needs, and the
  reader is trained on useless blocks instead. A fixed share makes the null document that
  sink. Returned as scores: their log-softmax is the log-prior itself.
  """
  retrieved = masked_log_softmax(retrieval_scores[:, 1:], candidate_valid[:, 1:])
  null = jnp.full_like(retrieval_scores[:, :1], jnp.log(null_prior))
  return jnp.concatenate([null, jnp.log1p(-null_prior) + retrieved], axis=1)


def realm_log_likelihood(retrieval_scores, token_log_probs, mask_weights, candidate_valid,
                         *, per_mask: bool = False):
  """log p(y|x) = log sum_z p(z|x) p(y|z,x) over the K candidates.

  retrieval_scores [B, K]; token_log_probs [B, K, M] = log p(y_m | z, x); mask_weights [B, M].
  The paper's p(y|z,x) is the product over the masked tokens (per_mask=False, returns [B]).
  The released REALM code marginalises each masked token separately (per_mask=True, [B, M]).
  """
  log_pz = masked_log_softmax(retrieval_scores, candidate_valid)
  if per_mask:
    joint = log_pz[:, :, None] + token_log_probs
    joint = jnp.where(candidate_valid[:, :, None], joint, NEG_INF)
    return jax.nn.logsumexp(joint, axis=1) * mask_weights
  log_py_z = jnp.sum(token_log_probs * mask_weights[:, None, :], axis=-1)
  joint = jnp.where(candidate_valid, log_pz + log_py_z, NEG_INF)
  return jax.nn.logsumexp(joint, axis=-1)


def realm_loss_sharpened_posterior(retrieval_scores, token_log_probs, mask_weights,
                                   candidate_valid, *, posterior_power: float):
  """-log p(y|x) per example, whose gradient on the retrieval scores is p_a(z|x,y) - p(z|x)
  with p_a(z|x,y) proportional to p(z|x) p(y|z,x)^a, while the reader's gradient is REALM's.

  At a = 1 this is REALM's gradient exactly. The retriever's gradient on a block is its
  posterior above its prior: when the reader prefers the block that states the fact only a
  little (posterior 0.22 against a prior of 0.15 in the experiment log), the retriever learns
  about a tenth of what the block itself as a label would teach. a > 1 moves the posterior
  towards the reader's favourite block (a -> infinity is hard EM, Min et al. 2019) without
  changing what the reader is trained on. The value returned is the true -log p(y|x).
  """
  log_pz = masked_log_softmax(retrieval_scores, candidate_valid)
  log_py_z = jnp.sum(token_log_probs * mask_weights[:, None, :], axis=-1)
  sg = jax.lax.stop_gradient
  joint = lambda prior, lik: jax.nn.logsumexp(
      jnp.where(candidate_valid, prior + lik, NEG_INF), axis=-1)
  true_nll = -joint(log_pz, log_py_z)
  reader_nll = -joint(sg(log_pz), log_py_z)
  retriever_nll = -joint(log_pz, posterior_power * sg(log_py_z))
  surrogate = reader_nll + retriever_nll
  return surrogate - sg(surrogate) + sg(true_nll)


def source_block_masses(retrieval_scores, token_log_probs, mask_weights, candidate_valid,
                        is_source):
  """Mean p(z|x) and p(z|x,y) of the source block, over sentences whose source is a candidate.

  The retriever's gradient on a candidate's score is p(z|x,y) - p(z|x): the posterior above the
  prior is the reader's vote for the block that holds the fact, so the gap between these two is
  how much REALM's objective can teach the retriever per example.
  """
  log_pz = masked_log_softmax(retrieval_scores, candidate_valid)
  log_py_z = jnp.sum(token_log_probs * mask_weights[:, None, :], axis=-1)
  log_post = masked_log_softmax(log_pz + log_py_z, candidate_valid)
  present = jnp.any(is_source, axis=-1)
  count = jnp.maximum(jnp.sum(present), 1.0)
  mass = lambda log_p: jnp.sum(jnp.where(is_source, jnp.exp(log_p), 0.0)) / count
  # How often the reader likes the source block best of the retrieved (null excluded): what a
  # sharpened posterior would then push the retriever towards.
  favourite = jnp.argmax(jnp.where(candidate_valid[:, 1:], log_py_z[:, 1:], NEG_INF), axis=-1)
  hit = jnp.take_along_axis(is_source[:, 1:], favourite[:, None], axis=-1)[:, 0] & present
  return {"source_prior": mass(log_pz), "source_posterior": mass(log_post),
          "source_reader_favourite": jnp.sum(hit) / count}


def marginal_span_log_likelihood(logits, gold, valid):
  """log sum_{gold} exp(logit) - log sum_{valid} exp(logit), over all trailing axes.

  Returns ([B], has_gold [B]); rows without a gold entry contribute nothing to the loss.
  """
  flat = lambda x: x.reshape(x.shape[0], -1)
  logits, gold, valid = flat(logits), flat(gold) & flat(valid), flat(valid)
  has_gold = jnp.any(gold, axis=-1)
  num = jax.nn.logsumexp(jnp.where(gold, logits, NEG_INF), axis=-1)
  den = jax.nn.logsumexp(jnp.where(valid, logits, NEG_INF), axis=-1)
  return jnp.where(has_gold, num - den, 0.0), has_gold
