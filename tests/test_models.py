"""The REALM / ORQA maths against direct computations on tiny inputs."""
from __future__ import annotations

import itertools

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from flax.core import meta

from realm_bench import models, objectives, warm_start as warm_start_lib
from realm_bench.errors import InputError
from realm_bench.networks.bert import BertConfig
from realm_bench.networks.reader import span_validity

jax.config.update("jax_enable_x64", False)
RNG = np.random.default_rng(0)


def _direct_log_likelihood(scores, token_log_probs, weights, valid):
  """log sum_z p(z|x) prod_m p(y_m|z,x), with a plain loop."""
  out = []
  for b in range(scores.shape[0]):
    zs = [z for z in range(scores.shape[1]) if valid[b, z]]
    p_z = np.exp(scores[b, zs] - np.max(scores[b, zs]))
    p_z /= p_z.sum()
    total = 0.0
    for p, z in zip(p_z, zs):
      p_y = 1.0
      for m in range(weights.shape[1]):
        if weights[b, m]:
          p_y *= np.exp(token_log_probs[b, z, m])
      total += p * p_y
    out.append(np.log(total))
  return np.array(out)


def _random_inputs(b=3, k=4, m=3):
  scores = RNG.normal(size=(b, k)).astype(np.float32)
  token_log_probs = np.log(RNG.uniform(0.05, 0.95, size=(b, k, m))).astype(np.float32)
  weights = np.ones((b, m), np.float32)
  weights[0, -1] = 0.0            # a padded mask slot
  valid = np.ones((b, k), bool)
  valid[1, -1] = False            # a padded candidate
  return scores, token_log_probs, weights, valid


def test_marginal_likelihood_equals_direct_sum():
  scores, tlp, w, valid = _random_inputs()
  got = objectives.realm_log_likelihood(scores, tlp, w, valid)
  np.testing.assert_allclose(got, _direct_log_likelihood(scores, tlp, w, valid), rtol=1e-5)


def test_per_mask_marginal_matches_released_code_form():
  scores, tlp, w, valid = _random_inputs()
  got = np.asarray(objectives.realm_log_likelihood(scores, tlp, w, valid, per_mask=True))
  for b, m in itertools.product(range(3), range(3)):
    zs = valid[b]
    p_z = np.exp(scores[b, zs]) / np.exp(scores[b, zs]).sum()
    want = np.log(np.sum(p_z * np.exp(tlp[b, zs, m]))) * w[b, m]
    assert got[b, m] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_null_prior_fixes_the_null_share_and_keeps_the_retrieved_ratios():
  scores, _, _, valid = _random_inputs()
  p = np.exp(np.asarray(objectives.masked_log_softmax(
      objectives.with_null_prior(scores, valid, 0.3), valid)))
  np.testing.assert_allclose(p[:, 0], 0.3, rtol=1e-5)
  np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(p[1, 3], 0.0, atol=1e-7)           # padded candidate
  ratio = np.exp(scores[0, 1] - scores[0, 2])
  assert p[0, 1] / p[0, 2] == pytest.approx(ratio, rel=1e-4)


def test_source_block_masses_are_its_prior_and_posterior_over_rows_that_hold_it():
  scores, tlp, w, valid = _random_inputs()
  valid[:] = True
  is_source = np.zeros(valid.shape, bool)
  is_source[0, 2] = True                     # row 1 has no source candidate: not counted
  got = objectives.source_block_masses(scores, tlp, w, valid, is_source)
  p_z = np.exp(scores[0]) / np.exp(scores[0]).sum()
  joint = p_z * np.exp(np.sum(tlp[0] * w[0][None, :], axis=-1))
  assert float(got["source_prior"]) == pytest.approx(p_z[2], rel=1e-5)
  assert float(got["source_posterior"]) == pytest.approx(joint[2] / joint.sum(), rel=1e-5)


def test_retriever_gradient_is_the_papers_r_of_z():
  """d log p(y|x) / d f(x,z) = [p(y|z,x) / p(y|x) - 1] p(z|x)   (REALM, Appendix A)."""
  scores, tlp, w, valid = _random_inputs()
  valid[:] = True
  grad = jax.grad(lambda s: jnp.sum(objectives.realm_log_likelihood(s, tlp, w, valid)))(scores)
  p_z = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
  p_y_z = np.exp(np.sum(tlp * w[:, None, :], axis=-1))
  p_y = np.sum(p_z * p_y_z, axis=-1, keepdims=True)
  np.testing.assert_allclose(grad, (p_y_z / p_y - 1.0) * p_z, rtol=1e-4, atol=1e-6)


def test_sharpened_posterior_keeps_the_value_and_the_readers_gradient():
  """Power 1 is REALM's gradient; power a gives the scores p_a(z|x,y) - p(z|x), and the
  token log-probabilities (the reader) REALM's own gradient at any power."""
  scores, tlp, w, valid = _random_inputs()
  valid[:] = True
  realm = lambda s, t: -jnp.sum(objectives.realm_log_likelihood(s, t, w, valid))
  sharp = lambda a: lambda s, t: jnp.sum(objectives.realm_loss_sharpened_posterior(
      s, t, w, valid, posterior_power=a))
  np.testing.assert_allclose(sharp(3.0)(scores, tlp), realm(scores, tlp), rtol=1e-6)
  for a in (1.0, 3.0):
    g_scores, g_tlp = jax.grad(sharp(a), argnums=(0, 1))(scores, tlp)
    want_scores, want_tlp = jax.grad(realm, argnums=(0, 1))(scores, tlp)
    np.testing.assert_allclose(g_tlp, want_tlp, rtol=1e-5, atol=1e-7)
    p_z = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    lik = np.exp(a * np.sum(tlp * w[:, None, :], axis=-1))
    post = p_z * lik / np.sum(p_z * lik, axis=-1, keepdims=True)
    np.testing.assert_allclose(g_scores, p_z - post, rtol=1e-4, atol=1e-6)
    if a == 1.0:
      np.testing.assert_allclose(g_scores, want_scores, rtol=1e-4, atol=1e-6)


def test_reader_favourite_counts_rows_whose_best_retrieved_block_is_the_source():
  scores, tlp, w, valid = _random_inputs()
  valid[:] = True
  tlp[:] = -3.0
  tlp[0, 2] = -0.1                 # row 0: the reader likes candidate 2, the source
  tlp[2, 1] = -0.1                 # row 2: it likes candidate 1; the source is 3
  tlp[1, 0] = 0.0                  # row 1: the null document is best, but it is not counted
  is_source = np.zeros(valid.shape, bool)
  is_source[0, 2] = is_source[2, 3] = True
  got = objectives.source_block_masses(scores, tlp, w, valid, is_source)
  assert float(got["source_reader_favourite"]) == pytest.approx(0.5)


def test_padded_candidates_and_masks_change_nothing():
  scores, tlp, w, valid = _random_inputs()
  base = objectives.realm_log_likelihood(scores, tlp, w, valid)
  scores2, tlp2 = scores.copy(), tlp.copy()
  scores2[1, -1] = 50.0          # an invalid candidate with a huge score
  tlp2[0, :, -1] = -30.0         # a padded mask slot with a terrible prediction
  np.testing.assert_allclose(objectives.realm_log_likelihood(scores2, tlp2, w, valid), base,
                             rtol=1e-6)


def test_marginal_span_log_likelihood_direct():
  logits = RNG.normal(size=(2, 2, 4, 3)).astype(np.float32)
  valid = RNG.uniform(size=logits.shape) > 0.3
  gold = np.zeros(logits.shape, bool)
  gold[0, 1, 2, 0] = gold[0, 0, 1, 1] = True
  valid[0, 1, 2, 0] = valid[0, 0, 1, 1] = True
  ll, has = objectives.marginal_span_log_likelihood(logits, gold, valid)
  e = np.exp(logits[0])
  want = np.log(e[gold[0]].sum()) - np.log(e[valid[0]].sum())
  assert float(ll[0]) == pytest.approx(want, rel=1e-5)
  assert list(np.asarray(has)) == [True, False] and float(ll[1]) == 0.0


def test_spans_never_cross_the_block_boundary():
  valid = np.asarray(span_validity(12, 4, jnp.array([3]), jnp.array([5])))[0]
  for i, w in itertools.product(range(12), range(4)):
    assert valid[i, w] == (3 <= i and i + w <= 7)


TINY = BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=32,
                  max_len=64, dropout_rate=0.0)
CLS, SEP = 2, 3   # the project's vocabulary puts them there


def test_padding_does_not_change_embeddings():
  model = models.IctModel(retriever_config=TINY, proj_dim=8, sep_id=SEP)
  ids = np.array([[2, 7, 9, 3]], np.int32)
  params = model.init_params(jax.random.PRNGKey(0), {"query_ids": ids, "doc_ids": ids})
  embed = jax.jit(model.embed_queries)
  a = embed(params, ids)
  b = embed(params, np.pad(ids, ((0, 0), (0, 6))))
  np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_ict_loss_is_the_in_batch_cross_entropy_of_the_scaled_inner_products():
  ids = RNG.integers(5, 50, size=(3, 6)).astype(np.int32)
  ids[:, 0], ids[:, 2] = CLS, SEP
  batch = {"query_ids": ids[:, 3:], "doc_ids": ids}
  model = models.IctModel(retriever_config=TINY, proj_dim=8, sep_id=SEP, score_scale=0.25)
  params = model.init_params(jax.random.PRNGKey(0), batch)
  loss, _ = model.loss_fn(params, batch, jax.random.PRNGKey(1))   # TINY has no dropout
  q = model.embed_queries(params, batch["query_ids"])
  d = model.embed_docs(params, batch["doc_ids"])
  log_probs = jax.nn.log_softmax(0.25 * np.asarray(q) @ np.asarray(d).T, axis=-1)
  assert float(loss) == pytest.approx(-float(np.mean(np.diag(log_probs))), rel=1e-5)


def _pretrain_batch(b=2, k=3, lq=6, lb=5, m=2):
  q = RNG.integers(5, 50, size=(b, lq)).astype(np.int32)
  q[:, -1] = 0
  docs = RNG.integers(5, 50, size=(b, k, lb)).astype(np.int32)
  docs[..., 0], docs[..., 2], docs[..., -1] = CLS, SEP, SEP   # [CLS] t [SEP] body [SEP]
  joint = np.concatenate([np.broadcast_to(q[:, None], (b, k, lq)), docs], axis=-1)
  types = np.concatenate([np.zeros((b, k, lq)), np.ones((b, k, lb))], -1).astype(np.int32)
  return {"query_ids": q, "cand_doc_ids": docs, "joint_ids": joint, "joint_types": types,
          "mlm_positions": np.tile(np.arange(1, m + 1, dtype=np.int32), (b, 1)),
          "mlm_targets": RNG.integers(5, 50, size=(b, m)).astype(np.int32),
          "mlm_weights": np.ones((b, m), np.float32), "cand_valid": np.ones((b, k), np.float32)}


@pytest.mark.parametrize("share", [True, False])
def test_realm_loss_equals_direct_computation_from_the_networks(share):
  model = models.RealmPretrainModel(retriever_config=TINY, proj_dim=8, share_embedders=share,
                                    reader_config=TINY, sep_id=SEP)
  batch = _pretrain_batch()
  params = model.init_params(jax.random.PRNGKey(1), batch)
  assert ("embedder" in params["retriever"]) == share
  loss, metrics = jax.jit(model.loss_fn)(params, batch, jax.random.PRNGKey(2))
  out = jax.jit(model.predict_batch)(params, batch)
  # Scores recomputed from the towers directly.
  q = jax.jit(model.embed_queries)(params, batch["query_ids"])
  d = jax.jit(model.embed_docs)(params, batch["cand_doc_ids"].reshape(-1, 5)).reshape(2, 3, -1)
  np.testing.assert_allclose(out["retrieval_scores"], np.einsum("bd,bkd->bk", q, d),
                             rtol=1e-4, atol=1e-5)
  direct = _direct_log_likelihood(np.asarray(out["retrieval_scores"]),
                                  np.asarray(out["token_log_probs"]), batch["mlm_weights"],
                                  batch["cand_valid"] > 0)
  assert float(loss) == pytest.approx(-direct.sum() / batch["mlm_weights"].sum(), rel=1e-4)
  # Gradients reach the retriever through the recomputed scores.
  grads = jax.jit(jax.grad(lambda p: model.loss_fn(p, batch, jax.random.PRNGKey(2))[0]))(params)
  norm = sum(float(jnp.sum(g ** 2)) for g in jax.tree_util.tree_leaves(grads["retriever"]))
  assert norm > 0.0
  assert set(metrics) >= {"retrieval_utility", "marginal_retrieval_utility", "null_doc_prob"}


def _qa_batch(b=2, r=2, n=4, lq=5, lr=12, w=3, body=5):
  rng = np.random.default_rng(3)
  body_len = np.array([[4, 3], [0, 5]], np.int32)
  positions = np.where(np.arange(body) < body_len[..., None], 7 + np.arange(body), 0)
  gold = np.zeros((b, r, body, w), np.float32)
  gold[0, 1, 1, 1] = 1.0
  return {"query_ids": rng.integers(5, 50, size=(b, lq)).astype(np.int32),
          "reader_ids": rng.integers(5, 50, size=(b, r, lr)).astype(np.int32),
          "reader_types": np.zeros((b, r, lr), np.int32),
          "retrieved_doc_emb": rng.normal(size=(b, n, 8)).astype(np.float32),
          "retrieved_valid": np.ones((b, n), np.float32),
          "retrieved_has_answer": np.array([[0, 1, 0, 1], [0, 0, 0, 0]], np.float32),
          "body_positions": positions.astype(np.int32), "body_len": body_len,
          "gold_spans": gold}


def test_open_qa_loss_and_prediction():
  model = models.OpenQAModel(retriever_config=TINY, proj_dim=8, reader_config=TINY,
                             span_hidden=8, max_span_len=3, sep_id=SEP)
  batch = _qa_batch()
  params = model.init_params(jax.random.PRNGKey(0), batch)
  loss, metrics = jax.jit(model.loss_fn)(params, batch, jax.random.PRNGKey(1))
  scores, logits, valid = jax.jit(model._forward)(params, batch)  # pylint: disable=protected-access
  scores, logits, valid = map(np.asarray, (scores, logits, valid))
  # Reader: only example 0 has a gold span; retriever: only example 0 has an answer.
  e = np.exp(logits[0] - logits[0][valid[0]].max())
  reader = np.log(e[1, 1, 1]) - np.log(e[valid[0]].sum())
  s = np.exp(scores[0])
  retriever = np.log(s[[1, 3]].sum()) - np.log(s.sum())
  assert float(loss) == pytest.approx(-(reader + retriever), rel=1e-4)
  assert float(metrics["gold_in_read_blocks"]) == 0.5
  pred = jax.jit(model.predict_batch)(params, batch)
  blk, start, end = (int(pred[k][0]) for k in ("block", "start", "end"))
  assert 0 <= start <= end < batch["body_len"][0, blk] and end - start < 3
  # Block 0 of example 1 has an empty body: its spans are never valid.
  assert not valid[1, 0].any()


def test_span_head_on_the_body_positions_equals_the_whole_input_head_at_valid_spans():
  # The span head once ran on every reader position; it now reads only the body's (E119).
  model = models.OpenQAModel(retriever_config=TINY, proj_dim=8, reader_config=TINY,
                             span_hidden=8, max_span_len=3, sep_id=SEP, span_retrieval_weight=0.0)
  batch = _qa_batch()
  params = model.init_params(jax.random.PRNGKey(0), batch)

  def whole_input(net, reader_ids, reader_types):
    hidden, _ = net.reader(reader_ids, reader_types, deterministic=True)
    return net.span_head(hidden)

  whole = np.asarray(model._qa_net().apply(  # pylint: disable=protected-access
      {"params": params}, batch["reader_ids"], batch["reader_types"], method=whole_input))
  _, logits, valid = map(np.asarray, model._forward(params, batch))  # pylint: disable=protected-access
  b, r, i, w = np.nonzero(valid)
  assert len(b) > 10
  np.testing.assert_allclose(logits[b, r, i, w],
                             whole[b, r, batch["body_positions"][b, r, i], w], rtol=1e-5,
                             atol=1e-6)


def test_span_retrieval_weight_scales_the_retrieval_score_in_the_span_logits():
  kwargs = dict(retriever_config=TINY, proj_dim=8, reader_config=TINY, span_hidden=8,
                max_span_len=3, sep_id=SEP)
  batch = _qa_batch()
  orqa = models.OpenQAModel(**kwargs)
  params = orqa.init_params(jax.random.PRNGKey(0), batch)
  forward = lambda m, b: [np.asarray(x) for x in m._forward(params, b)]  # pylint: disable=protected-access
  scores, with_scores, _ = forward(orqa, batch)
  _, half, _ = forward(models.OpenQAModel(**kwargs, span_retrieval_weight=0.5), batch)
  alone = models.OpenQAModel(**kwargs, span_retrieval_weight=0.0)
  s2, reader_only, _ = forward(alone, batch)
  np.testing.assert_allclose(s2, scores)        # the retriever still scores every block
  shift = scores[:, :2, None, None]
  np.testing.assert_allclose(with_scores - reader_only, np.broadcast_to(shift, with_scores.shape),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(half - reader_only, 0.5 * (with_scores - reader_only),
                             rtol=1e-5, atol=1e-5)
  # At 0 the answer does not depend on the document embeddings; at 1 it does.
  other = dict(batch, retrieved_doc_emb=-batch["retrieved_doc_emb"])
  np.testing.assert_allclose(forward(alone, other)[1], reader_only)
  assert not np.allclose(forward(orqa, other)[1], with_scores)


def test_bf16_dots_accumulate_in_fp32_forward_and_backward():
  from realm_bench.networks import bert  # pylint: disable=g-import-not-at-top
  cfg32 = BertConfig(vocab_size=50, hidden_size=16, num_heads=2)
  cfg16 = BertConfig(vocab_size=50, hidden_size=16, num_heads=2, dtype="bfloat16")
  rng = np.random.default_rng(7)
  a = rng.normal(size=(3, 4, 8)).astype(np.float32)
  b = rng.normal(size=(8, 5)).astype(np.float32)
  c = rng.normal(size=(3, 4, 5)).astype(np.float32)
  loss = lambda cfg: lambda a, b: jnp.sum(c * bert.einsum(cfg, "xyw,wp->xyp", a, b))
  g32 = jax.grad(loss(cfg32), argnums=(0, 1))(a, b)
  g16 = jax.grad(loss(cfg16), argnums=(0, 1))(a, b)
  for x, y in zip(g16, g32):
    assert x.dtype == jnp.float32
    # bf16 keeps 8 bits of mantissa: about 0.4% per operand, sums of a dozen terms.
    np.testing.assert_allclose(x, y, rtol=0.03, atol=0.03 * float(np.abs(y).max()))
  def dots(jaxpr):
    yield from (e for e in jaxpr.eqns if e.primitive.name == "dot_general")
    for sub in jax.extend.core.subjaxprs(jaxpr):
      yield from dots(sub)
  found = list(dots(jax.make_jaxpr(jax.grad(loss(cfg16), argnums=(0, 1)))(a, b).jaxpr))
  assert len(found) == 3   # the forward dot and both gradients
  assert all(v.aval.dtype == jnp.bfloat16 for e in found for v in e.invars)
  assert all(e.outvars[0].aval.dtype == jnp.float32 for e in found)


def test_bf16_attention_runs_every_dot_in_bf16_on_the_cpu_and_matches_fp32():
  """The attention's backward dots too: a layout without an XLA:CPU kernel fails at run time."""
  from realm_bench.networks import bert  # pylint: disable=g-import-not-at-top
  cfgs = {d: BertConfig(vocab_size=50, hidden_size=16, num_heads=2, dtype=d, dropout_rate=0.0)
          for d in ("float32", "bfloat16")}
  rng = np.random.default_rng(3)
  x = rng.normal(size=(2, 5, 16)).astype(np.float32)
  bias = np.zeros((2, 1, 1, 5), np.float32)
  layer = bert.SelfAttention(cfgs["float32"])
  params = layer.init(jax.random.PRNGKey(0), x, bias, True)
  w = rng.normal(size=(2, 5, 16)).astype(np.float32)

  def loss(cfg):
    return lambda p, x: jnp.sum(w * bert.SelfAttention(cfg).apply(p, x, bias, True))

  grads = {d: jax.jit(jax.grad(loss(c), argnums=(0, 1)))(params, x) for d, c in cfgs.items()}
  # One absolute scale for all: the key bias's gradient is zero in exact arithmetic (softmax
  # ignores a constant per query), so its bf16 rounding noise has no scale of its own.
  scale = max(float(np.abs(g).max()) for g in jax.tree.leaves(grads["float32"]))
  for g16, g32 in zip(jax.tree.leaves(grads["bfloat16"]), jax.tree.leaves(grads["float32"])):
    assert g16.dtype == jnp.float32
    np.testing.assert_allclose(g16, g32, rtol=0.05, atol=0.02 * scale)

  def dots(jaxpr):
    yield from (e for e in jaxpr.eqns if e.primitive.name == "dot_general")
    for sub in jax.extend.core.subjaxprs(jaxpr):
      yield from dots(sub)
  found = list(dots(jax.make_jaxpr(jax.grad(loss(cfgs["bfloat16"]), argnums=(0, 1)))(
      params, x).jaxpr))
  assert len(found) == 18   # 6 einsums (4 projections, 2 attention), each forward + 2 grads
  assert all(v.aval.dtype == jnp.bfloat16 for e in found for v in e.invars)


def test_mlm_model_loss_is_the_mean_cross_entropy_of_the_masked_slots():
  model = models.MlmModel(config=TINY)
  ids = RNG.integers(5, 50, size=(2, 6)).astype(np.int32)
  batch = {"input_ids": ids, "mlm_positions": np.array([[1, 2], [3, 0]], np.int32),
           "mlm_targets": np.array([[7, 8], [9, 0]], np.int32),
           "mlm_weights": np.array([[1, 1], [1, 0]], np.float32)}
  params = model.init_params(jax.random.PRNGKey(0), batch)
  loss, metrics = jax.jit(model.loss_fn)(params, batch, jax.random.PRNGKey(1))
  logits = models.MlmNet(TINY).apply({"params": params}, ids, batch["mlm_positions"])
  log_probs = jax.nn.log_softmax(np.asarray(logits), axis=-1)
  direct = -(log_probs[0, 0, 7] + log_probs[0, 1, 8] + log_probs[1, 0, 9]) / 3
  assert float(loss) == pytest.approx(float(direct), rel=1e-5)
  assert 0.0 <= float(metrics["mlm_accuracy"]) <= 1.0
  tokens = jax.jit(model.predict_batch)(params, batch)["tokens"]
  np.testing.assert_array_equal(tokens, np.argmax(logits, axis=-1))


def test_next_sentence_loss_is_added_with_its_weight_over_the_paired_rows():
  ids = RNG.integers(5, 50, size=(3, 6)).astype(np.int32)
  batch = {"input_ids": ids, "mlm_positions": np.array([[1, 2], [3, 0], [2, 0]], np.int32),
           "mlm_targets": np.array([[7, 8], [9, 0], [6, 0]], np.int32),
           "mlm_weights": np.array([[1, 1], [1, 0], [1, 0]], np.float32),
           "next_is_random": np.array([1, 0, 1], np.int32),
           "next_sentence_weights": np.array([1, 1, 0], np.float32)}
  model = models.MlmModel(config=TINY, next_sentence_weight=0.5)
  params = meta.unbox(model.init_params(jax.random.PRNGKey(0), batch))
  assert params["next_sentence_head"]["kernel"].shape == (TINY.hidden_size, 2)
  loss, metrics = model.loss_fn(params, batch, None)
  mlm_logits, nsp_logits = models.MlmNet(TINY, next_sentence=True).apply(
      {"params": params}, ids, batch["mlm_positions"])
  lp = jax.nn.log_softmax(np.asarray(mlm_logits), axis=-1)
  mlm = -(lp[0, 0, 7] + lp[0, 1, 8] + lp[1, 0, 9] + lp[2, 0, 6]) / 4
  nsp = jax.nn.log_softmax(np.asarray(nsp_logits), axis=-1)
  nsp_loss = -(nsp[0, 1] + nsp[1, 0]) / 2           # row 2 has no second segment
  assert float(metrics["next_sentence_loss"]) == pytest.approx(float(nsp_loss), rel=1e-5)
  assert float(loss) == pytest.approx(float(mlm + 0.5 * nsp_loss), rel=1e-5)
  # The masked-LM parameters are those of the model without the head: a reader warm-starts.
  plain = models.MlmModel(config=TINY).init_params(jax.random.PRNGKey(0), batch)
  assert sorted(plain) == sorted(k for k in params if k != "next_sentence_head")
  del batch["next_is_random"]
  with pytest.raises(InputError, match="next_is_random"):
    model.loss_fn(params, batch, None)
  with pytest.raises(InputError, match="at least 0"):
    models.MlmModel(config=TINY, next_sentence_weight=-1.0).init_params(
        jax.random.PRNGKey(0), batch)


def test_warm_start_copies_named_subtrees_and_refuses_what_is_missing():
  params = {"retriever": {"embedder": {"bert": {"w": np.zeros(2)}, "p": np.zeros(1)}},
            "reader": {"w": np.zeros(2)}}
  bert = {"reader": {"w": np.ones(2)}, "mlm_head": {"b": np.ones(3)}}
  out = warm_start_lib.warm_start(params, bert, {"retriever/embedder/bert": "reader", "reader": "reader"})
  np.testing.assert_array_equal(out["retriever"]["embedder"]["bert"]["w"], [1, 1])
  np.testing.assert_array_equal(out["reader"]["w"], [1, 1])
  np.testing.assert_array_equal(out["retriever"]["embedder"]["p"], [0])   # untouched
  np.testing.assert_array_equal(params["reader"]["w"], [0, 0])            # not modified
  with pytest.raises(InputError, match="has no subtree 'span_head'"):
    warm_start_lib.warm_start(params, bert, {"reader": "span_head"})
  with pytest.raises(InputError, match="this model has no subtree 'mlm_head'"):
    warm_start_lib.warm_start(params, bert, {"mlm_head": "mlm_head"})
  # Another model size: the first parameter that differs, with both shapes.
  with pytest.raises(InputError, match=r"parameter 'reader/w' is \(3,\) there but \(2,\) here"):
    warm_start_lib.warm_start(params, {"reader": {"w": np.ones(3)}}, {"reader": "reader"})
  wider = {"reader": {"w": np.ones(2), "layer_1": {"k": np.ones((4, 4))}}}   # one more layer
  with pytest.raises(InputError, match="'reader/layer_1/k' is \\(4, 4\\) there but absent"):
    warm_start_lib.warm_start(params, wider, {"reader": "reader"})


@pytest.mark.parametrize("learned", [False, True])
def test_retrieval_scores_are_scaled_and_the_paper_setting_is_the_raw_product(learned):
  raw = models.RealmPretrainModel(retriever_config=TINY, proj_dim=8, reader_config=TINY,
                                  sep_id=SEP)
  scaled = models.RealmPretrainModel(retriever_config=TINY, proj_dim=8, reader_config=TINY,
                                     score_scale=0.25, learn_score_scale=learned, sep_id=SEP)
  batch = _pretrain_batch()
  params = raw.init_params(jax.random.PRNGKey(0), batch)
  scaled_params = scaled.init_params(jax.random.PRNGKey(0), batch)
  assert ("score_log_scale" in scaled_params) == learned
  s_raw = raw.predict_batch(params, batch)["retrieval_scores"]
  s_scaled = scaled.predict_batch({**scaled_params, **params}, batch)["retrieval_scores"]
  np.testing.assert_allclose(s_scaled, 0.25 * np.asarray(s_raw), rtol=1e-5)
  if learned:   # the temperature gets a gradient
    grads = jax.jit(jax.grad(lambda p: scaled.loss_fn(p, batch, jax.random.PRNGKey(1))[0]))(
        scaled_params)
    assert float(abs(grads["score_log_scale"])) > 0


@pytest.mark.parametrize("fields, match", [
    ({"posterior_power": 0.5}, "at least 1"),
    ({"posterior_power": 2.0, "per_mask_marginal": True}, "per_mask_marginal"),
    ({"null_prior": 1.0}, r"in \(0, 1\)"),
])
def test_realm_objective_knobs_are_checked_naming_the_field(fields, match):
  with pytest.raises(InputError, match=match) as caught:
    models.RealmPretrainModel(retriever_config=BertConfig(vocab_size=8),
                              separate_doc_segments=False, **fields)._pretrain_net()
  assert caught.value.field.startswith("RealmPretrainModel.")
