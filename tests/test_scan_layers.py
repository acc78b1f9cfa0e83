"""`BertConfig.scan_layers`: the same encoder with its layers stacked, converted both ways,
and refused with the knob's name where the two layouts meet unconverted."""
from __future__ import annotations

import dataclasses

import gin
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax.core import meta

from realm_bench import checkpoints, gin_utils, partitioning, warm_start as warm_start_lib
from realm_bench.errors import InputError
from realm_bench.networks import bert, hf_realm, layer_stack
from realm_bench.train_state import TrainState

CFG = bert.BertConfig(vocab_size=40, hidden_size=16, num_layers=3, num_heads=2, mlp_dim=32,
                      max_len=16, dropout_rate=0.1, init_std=0.2)
SCANNED = dataclasses.replace(CFG, scan_layers=True)
IDS = jnp.array([[2, 5, 6, 7, 3, 0], [2, 9, 3, 0, 0, 0]])


def _init(config):
  return bert.BertEncoder(config).init(jax.random.PRNGKey(0), IDS)["params"]


def _apply(config, params, deterministic=True):
  return bert.BertEncoder(config).apply({"params": params}, IDS, deterministic=deterministic,
                                        rngs={"dropout": jax.random.PRNGKey(1)})


def test_scan_layers_off_keeps_the_parameter_tree_of_numbered_layers():
  params = meta.unbox(_init(CFG))
  assert {"layer_0", "layer_1", "layer_2"} <= set(params) and "layers" not in params


def test_scanned_params_are_stacked_on_a_logical_layers_axis():
  boxed = _init(SCANNED)
  assert not any(k.startswith("layer_") for k in boxed)
  kernel = boxed["layers"]["attention"]["query"]["kernel"]
  assert kernel.names == ("layers", "embed", "heads", "kv")
  assert kernel.value.shape == (3, 16, 2, 8)
  unboxed = meta.unbox(_init(CFG))
  plain = jax.tree.map(np.shape, unboxed["layer_0"])
  stacked = jax.tree.map(lambda s: s[1:], jax.tree.map(np.shape, meta.unbox(boxed)["layers"]),
                         is_leaf=lambda x: isinstance(x, tuple))
  assert plain == stacked
  # The default rules place the new axis (unsharded); every other name is as before.
  shardings = partitioning.Partitioner().logical_shardings(boxed)
  assert shardings["layers"]["attention"]["query"]["kernel"].spec[0] is None


@pytest.mark.parametrize("remat", [False, True])
def test_scanned_forward_and_gradients_equal_the_unscanned_on_the_same_weights(remat):
  params = meta.unbox(_init(CFG))
  stacked = layer_stack.stack_layers(params)
  scanned = dataclasses.replace(SCANNED, remat=remat)
  for want, got in zip(_apply(CFG, params), _apply(scanned, stacked), strict=True):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)

  def loss(config, p):
    out, pooled = _apply(config, p)
    return jnp.sum(out ** 2) + jnp.sum(pooled)

  grads = jax.grad(lambda p: loss(CFG, p))(params)
  scanned_grads = layer_stack.unstack_layers(jax.grad(lambda p: loss(scanned, p))(stacked))
  # float32 accumulation order differs in the scanned backward pass, as under remat.
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
               grads, scanned_grads)


def test_scanned_layers_apply_dropout_when_not_deterministic():
  params = layer_stack.stack_layers(meta.unbox(_init(CFG)))
  a = _apply(SCANNED, params, deterministic=False)[0]
  b = _apply(SCANNED, params)[0]
  assert np.abs(np.asarray(a) - np.asarray(b)).max() > 1e-3


def test_stack_and_unstack_round_trip_exactly_inside_a_larger_tree():
  encoder = meta.unbox(_init(CFG))
  tree = {"retriever": {"embedder": {"bert": encoder, "projection": {"kernel": np.ones(2)}}},
          "opt": (optax.ScaleByAdamState(count=np.zeros([]), mu={"bert": encoder},
                                         nu={"bert": encoder}),)}
  stacked = layer_stack.stack_layers(tree)
  assert "layers" in stacked["retriever"]["embedder"]["bert"]
  assert "layers" in stacked["opt"][0].mu["bert"]
  back = layer_stack.unstack_layers(stacked)
  assert jax.tree.structure(back) == jax.tree.structure(tree)
  jax.tree.map(np.testing.assert_array_equal, back, tree)


def test_hf_mapping_loads_into_a_scanned_encoder_through_the_converter():
  params = meta.unbox(_init(CFG))
  state = {}
  for i in range(CFG.num_layers):   # HF's names, built back from this encoder's weights
    layer, pre = params[f"layer_{i}"], f"encoder.layer.{i}."
    for part in ("query", "key", "value"):
      state[f"{pre}attention.self.{part}.weight"] = np.asarray(
          layer["attention"][part]["kernel"]).reshape(16, 16).T
      state[f"{pre}attention.self.{part}.bias"] = np.asarray(
          layer["attention"][part]["bias"]).reshape(16)
    state[f"{pre}attention.output.dense.weight"] = np.asarray(
        layer["attention"]["out"]["kernel"]).reshape(16, 16).T
    state[f"{pre}attention.output.dense.bias"] = np.asarray(layer["attention"]["out"]["bias"])
    for ours, theirs in (("attention_norm", "attention.output.LayerNorm"),
                         ("mlp_norm", "output.LayerNorm")):
      state[f"{pre}{theirs}.weight"] = np.asarray(layer[ours]["norm"]["scale"])
      state[f"{pre}{theirs}.bias"] = np.asarray(layer[ours]["norm"]["bias"])
    for ours, theirs in (("mlp_in", "intermediate.dense"), ("mlp_out", "output.dense")):
      state[f"{pre}{theirs}.weight"] = np.asarray(layer[ours]["kernel"]).T
      state[f"{pre}{theirs}.bias"] = np.asarray(layer[ours]["bias"])
  state["embeddings.word_embeddings.weight"] = np.asarray(params["token_embed"]["embedding"])
  state["embeddings.position_embeddings.weight"] = np.asarray(params["position_embed"])
  state["embeddings.token_type_embeddings.weight"] = np.asarray(params["type_embed"])
  state["embeddings.LayerNorm.weight"] = np.asarray(params["embed_norm"]["norm"]["scale"])
  state["embeddings.LayerNorm.bias"] = np.asarray(params["embed_norm"]["norm"]["bias"])
  state["pooler.dense.weight"] = np.asarray(params["pooler"]["kernel"]).T
  state["pooler.dense.bias"] = np.asarray(params["pooler"]["bias"])
  mapped = hf_realm.bert_params(state, "", num_layers=CFG.num_layers, num_heads=CFG.num_heads)
  np.testing.assert_allclose(_apply(SCANNED, layer_stack.stack_layers(mapped))[1],
                             _apply(CFG, params)[1], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("source_scanned", [True, False])
def test_warm_start_across_layouts_names_the_knob_unless_converted(source_scanned):
  plain, stacked = meta.unbox(_init(CFG)), meta.unbox(_init(SCANNED))
  source, target = (stacked, plain) if source_scanned else (plain, stacked)
  knob = "scan_layers=True" if source_scanned else "scan_layers=False"
  with pytest.raises(InputError, match=f"{knob}.*SCAN_LAYERS.*layer_stack") as info:
    warm_start_lib.warm_start({"bert": target}, {"bert": source}, {"bert": "bert"})
  assert info.value.field == "warm_starts"
  convert = layer_stack.unstack_layers if source_scanned else layer_stack.stack_layers
  out = warm_start_lib.warm_start({"bert": target}, {"bert": convert(source)}, {"bert": "bert"})
  assert jax.tree.structure(out["bert"]) == jax.tree.structure(target)


def test_a_different_layer_count_is_not_mistaken_for_the_scan_layout():
  deeper = meta.unbox(_init(dataclasses.replace(CFG, num_layers=4)))
  with pytest.raises(InputError, match="a different model size") as info:
    warm_start_lib.warm_start({"bert": deeper}, {"bert": meta.unbox(_init(CFG))},
                              {"bert": "bert"})
  assert "scan_layers" not in info.value.reason


def test_restoring_a_scanned_checkpoint_into_an_unscanned_model_names_the_knob(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  stacked = meta.unbox(_init(SCANNED))
  manager.save(2, TrainState.create(stacked, optax.adam(1e-3)), {})
  manager.wait_until_finished()
  plain_state = TrainState.create(meta.unbox(_init(CFG)), optax.adam(1e-3))
  with pytest.raises(InputError, match="scan_layers=True.*SCAN_LAYERS") as info:
    manager.restore(target_state=plain_state)
  assert "does not fit this model" in info.value.reason
  restored, _ = manager.restore(target_state=TrainState.create(stacked, optax.adam(1e-3)))
  jax.tree.map(np.testing.assert_array_equal, restored.params, stacked)
  manager.close()


@pytest.mark.parametrize("size", ["tiny", "small", "base"])
def test_the_size_files_bind_scan_layers_and_remat_to_macros(size):
  gin_utils.parse_gin([f"sizes/{size}.gin"], ["SCAN_LAYERS = True", "REMAT = True"])
  config = bert.BertConfig()
  assert config.scan_layers and config.remat
  gin.clear_config()
  gin_utils.parse_gin([f"sizes/{size}.gin"])
  assert not bert.BertConfig().scan_layers and not bert.BertConfig().remat
  gin.clear_config()
