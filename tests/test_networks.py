"""The networks' REALM/ORQA details: document segments, GELU's form, LayerNorm epsilons and
the span head's LayerNorm. (tests/parity compares whole forward passes with Hugging Face's
REALM classes when torch is installed.)"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax.core import meta

from realm_bench import models
from realm_bench.networks import bert
from realm_bench.networks.embedder import Embedder, document_segment_ids
from realm_bench.networks.reader import SpanHead

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import span_head  # pylint: disable=g-import-not-at-top,wrong-import-position

CFG = bert.BertConfig(vocab_size=40, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=32,
                      max_len=32, dropout_rate=0.0, init_std=0.2)
CLS, SEP = 2, 3


def _featurized(title, body, length):
  """REALM's `featurize_document`: ids and segment ids of [CLS] title [SEP] body [SEP]."""
  ids = [CLS, *title, SEP, *body, SEP]
  types = [0] * (len(title) + 2) + [1] * (len(body) + 1)
  pad = length - len(ids)
  return ids + [0] * pad, types + [0] * pad


def test_document_segments_are_realms_title_zero_body_one():
  rows = [_featurized([7, 8], [9, 10, 11], 10), _featurized([], [], 10),   # the null document
          _featurized([7], [], 10), _featurized([7, 8, 9], [5] * 4, 10)]   # full, no padding
  ids = np.array([r[0] for r in rows], np.int32)
  want = np.array([r[1] for r in rows], np.int32)
  np.testing.assert_array_equal(document_segment_ids(ids, SEP), want)


def _docs_and_queries():
  docs = np.array([_featurized([7, 8], [9, 10, 11], 12)[0],
                   _featurized([12], [13, 14, 15, 16, 17], 12)[0]], np.int32)
  queries = np.array([[CLS, 9, 10, SEP, 0, 0], [CLS, 20, 21, 22, SEP, 0]], np.int32)
  return docs, queries


@pytest.mark.parametrize("separate", [True, False])
def test_document_tower_uses_the_body_segment_and_the_query_tower_does_not(separate):
  docs, queries = _docs_and_queries()
  model = models.IctModel(retriever_config=CFG, proj_dim=8, sep_id=SEP,
                          separate_doc_segments=separate)
  params = meta.unbox(model.init_params(jax.random.PRNGKey(0),
                                        {"query_ids": queries, "doc_ids": docs}))
  bert_params = params["retriever"]["embedder"]["bert"]
  moved = jax.tree.map(lambda x: x, params)
  shift = np.linspace(-1.0, 1.0, CFG.hidden_size)   # not constant: LayerNorm would remove it
  moved["retriever"]["embedder"]["bert"] = {
      **bert_params, "type_embed": bert_params["type_embed"].at[1].add(shift)}
  d0, d1 = (np.asarray(model.embed_docs(p, docs)) for p in (params, moved))
  q0, q1 = (np.asarray(model.embed_queries(p, queries)) for p in (params, moved))
  np.testing.assert_array_equal(q0, q1)             # queries are one segment
  assert (np.abs(d0 - d1).max() > 1e-3) == separate
  if separate:   # the tower's own segment ids are the featurizer's
    types = np.array([_featurized([7, 8], [9, 10, 11], 12)[1],
                      _featurized([12], [13, 14, 15, 16, 17], 12)[1]], np.int32)
    explicit = Embedder(CFG, 8).apply({"params": params["retriever"]["embedder"]}, docs, types)
    np.testing.assert_allclose(d0, explicit, rtol=1e-6, atol=1e-6)


def test_a_retriever_model_without_a_separator_id_is_refused():
  with pytest.raises(ValueError, match="no vocabulary or sep_id"):
    models.IctModel(retriever_config=CFG, proj_dim=8)
  models.IctModel(retriever_config=CFG, proj_dim=8, separate_doc_segments=False)


def _encode(config, ids):
  enc = bert.BertEncoder(config)
  params = enc.init(jax.random.PRNGKey(0), ids)
  return enc.apply(params, ids)[0]


def test_gelu_is_the_tanh_form_by_default_and_the_erf_form_on_request():
  assert bert.BertConfig().gelu_approximate
  x = jnp.linspace(-4.0, 4.0, 41)
  tanh_form = 0.5 * x * (1 + jnp.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(bert.gelu(CFG, x), tanh_form, rtol=1e-6, atol=1e-7)
  erf = dataclasses.replace(CFG, gelu_approximate=False)
  np.testing.assert_allclose(bert.gelu(erf, x), jax.nn.gelu(x, approximate=False), rtol=1e-6)
  ids = np.array([[CLS, 5, 6, 7, SEP]], np.int32)
  assert float(jnp.abs(_encode(CFG, ids) - _encode(erf, ids)).max()) > 1e-5


def test_layer_norm_epsilon_is_the_configs():
  assert bert.BertConfig().layer_norm_eps == 1e-12
  ids = np.array([[CLS, 5, 6, 7, SEP]], np.int32)
  wide = dataclasses.replace(CFG, layer_norm_eps=10.0)   # large enough to show
  assert float(jnp.abs(_encode(CFG, ids) - _encode(wide, ids)).max()) > 1e-3


def test_span_head_is_relu_layernorm_dense_as_orqa_reads():
  h = np.random.default_rng(0).normal(size=(2, 6, CFG.hidden_size)).astype(np.float32)
  head = SpanHead(CFG, hidden=8, max_span_len=3)
  params = meta.unbox(head.init(jax.random.PRNGKey(0), h))["params"]
  assert set(params) == {"start", "end", "hidden_norm", "score"}
  params["hidden_norm"]["norm"] = {"scale": np.linspace(0.5, 1.5, 8, dtype=np.float32),
                                   "bias": np.linspace(-0.2, 0.2, 8, dtype=np.float32)}
  got = np.asarray(head.apply({"params": params}, h))
  dense = lambda p, x: x @ np.asarray(p["kernel"]) + np.asarray(p["bias"])
  start, end = dense(params["start"], h), dense(params["end"], h)
  for i, w in [(0, 0), (2, 1), (3, 2)]:
    x = np.maximum(start[:, i] + end[:, i + w], 0.0)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = (x - mean) / np.sqrt(var + 1e-3) * params["hidden_norm"]["norm"]["scale"]
    x = x + params["hidden_norm"]["norm"]["bias"]
    np.testing.assert_allclose(got[:, i, w], dense(params["score"], x)[:, 0], rtol=1e-4,
                               atol=1e-5)
  plain = SpanHead(CFG, hidden=8, max_span_len=3, layer_norm=False)
  assert "hidden_norm" not in plain.init(jax.random.PRNGKey(0), h)["params"]


def test_span_head_has_the_layer_by_layer_heads_parameters_values_and_gradients():
  # The layer-by-layer form is benchmarks/span_head.py's baseline (the head until E119).
  h = jnp.asarray(np.random.default_rng(1).normal(size=(2, 7, CFG.hidden_size)), jnp.float32)
  head, reference = SpanHead(CFG, hidden=8, max_span_len=3), span_head.LayerByLayer(CFG, 8, 3)
  params = meta.unbox(head.init(jax.random.PRNGKey(0), h))
  assert jax.tree_util.tree_all(jax.tree_util.tree_map(
      np.array_equal, params, meta.unbox(reference.init(jax.random.PRNGKey(0), h))))
  rng = np.random.default_rng(2)   # away from the initial LayerNorm's ones and zeros
  params = jax.tree_util.tree_map(lambda p: p + 0.3 * rng.normal(size=p.shape), params)
  loss = lambda module: lambda p, x: jnp.sum(jnp.tanh(module.apply(p, x)))
  np.testing.assert_allclose(head.apply(params, h), reference.apply(params, h), rtol=1e-5,
                             atol=1e-5)
  got = jax.grad(loss(head), argnums=(0, 1))(params, h)
  want = jax.grad(loss(reference), argnums=(0, 1))(params, h)
  for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("deterministic", [True, False])
def test_remat_recomputes_layers_without_changing_values_or_gradients(deterministic):
  base = dataclasses.replace(CFG, num_layers=2, dropout_rate=0.1)
  ids = jnp.array([[2, 5, 6, 7, 3, 0], [2, 9, 3, 0, 0, 0]])

  def loss(config, params):
    out, pooled = bert.BertEncoder(config).apply(
        {"params": params}, ids, deterministic=deterministic,
        rngs={"dropout": jax.random.PRNGKey(1)})
    return jnp.sum(out ** 2) + jnp.sum(pooled)

  params = meta.unbox(bert.BertEncoder(base).init(jax.random.PRNGKey(0), ids)["params"])
  plain = jax.value_and_grad(lambda p: loss(base, p))(params)
  remat = jax.value_and_grad(lambda p: loss(dataclasses.replace(base, remat=True), p))(params)
  np.testing.assert_allclose(plain[0], remat[0], rtol=1e-6)
  for a, b in zip(jax.tree.leaves(plain[1]), jax.tree.leaves(remat[1]), strict=True):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)   # float32 recomputation order


def test_span_head_benchmark_refuses_a_body_longer_than_the_reader_input(capsys):
  with pytest.raises(SystemExit) as e:
    span_head.main(["--body", "40", "--reader_len", "39"])
  assert e.value.code == 2 and "--body must be in 1..--reader_len (39), got 40" in \
      capsys.readouterr().err
