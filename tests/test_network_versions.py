"""Runs trained before the networks were made REALM's exactly (no span-head LayerNorm) are
refused with the fix, and load with models/networks_v0.gin."""
from __future__ import annotations

import gin
import jax
import numpy as np
import optax
import pytest
from flax.core import meta

from realm_bench import checkpoints, gin_utils, infer, models, warm_start as warm_start_lib
from realm_bench.errors import InputError
from realm_bench.networks import bert
from realm_bench.train_state import TrainState

CFG = bert.BertConfig(vocab_size=50, hidden_size=16, num_layers=1, num_heads=2, mlp_dim=32,
                      max_len=64, dropout_rate=0.0)


def _qa_batch(b=1, r=2, n=3, lq=5, lr=12, w=3):
  rng = np.random.default_rng(0)
  return {"query_ids": rng.integers(5, 50, size=(b, lq)).astype(np.int32),
          "reader_ids": rng.integers(5, 50, size=(b, r, lr)).astype(np.int32),
          "reader_types": np.zeros((b, r, lr), np.int32),
          "retrieved_doc_emb": rng.normal(size=(b, n, 8)).astype(np.float32),
          "retrieved_valid": np.ones((b, n), np.float32),
          "retrieved_has_answer": np.zeros((b, n), np.float32),
          "body_positions": np.broadcast_to(7 + np.arange(4, dtype=np.int32), (b, r, 4)),
          "body_len": np.full((b, r), 4, np.int32),
          "gold_spans": np.zeros((b, r, 4, w), np.float32)}


def _model(layer_norm: bool):
  return models.OpenQAModel(retriever_config=CFG, proj_dim=8, reader_config=CFG, span_hidden=8,
                            max_span_len=3, sep_id=3, span_layer_norm=layer_norm)


def _params(layer_norm: bool):
  return meta.unbox(_model(layer_norm).init_params(jax.random.PRNGKey(0), _qa_batch()))


def _state(params):
  return TrainState.create(params, optax.sgd(0.1))


def test_resuming_an_old_run_names_the_missing_layernorm_and_the_gin_file(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(4, _state(_params(layer_norm=False)), {})
  manager.wait_until_finished()
  with pytest.raises(InputError, match=r"before the span head had ORQA's LayerNorm.*"
                                       r"--gin_file=models/networks_v0.gin") as info:
    manager.restore(target_state=_state(_params(layer_norm=True)))
  assert info.value.field.startswith("span_head/hidden_norm/")
  restored, _ = manager.restore(target_state=_state(_params(layer_norm=False)))
  assert "hidden_norm" not in restored.params["span_head"]
  manager.close()


def test_a_new_run_under_the_old_networks_is_refused_the_other_way(tmp_path):
  manager = checkpoints.CheckpointManager(tmp_path)
  manager.save(4, _state(_params(layer_norm=True)), {})
  manager.wait_until_finished()
  with pytest.raises(InputError, match="drop models/networks_v0.gin"):
    manager.restore(target_state=_state(_params(layer_norm=False)))
  manager.close()


class _Pipeline:
  def shape_batch(self, raw):
    del raw
    return _qa_batch()


def test_evaluating_an_old_run_names_the_gin_file_not_another_kind_of_run():
  with pytest.raises(InputError, match="networks_v0.gin") as info:
    infer.check_fits(_model(True), _Pipeline(), _params(False), [{}], where="run/checkpoints")
  assert "ICT or pre-training" not in str(info.value)
  infer.check_fits(_model(False), _Pipeline(), _params(False), [{}], where="run/checkpoints")


def test_warm_starting_the_span_head_from_an_old_run_names_the_gin_file():
  with pytest.raises(InputError, match="networks_v0.gin"):
    warm_start_lib.warm_start(_params(True), _params(False), {"span_head": "span_head"})
  # The encoders did not change shape: the usual warm starts from old runs still work.
  warm_start_lib.warm_start(_params(True), _params(False), {"reader": "reader", "retriever": "retriever"})


def test_networks_v0_gin_restores_the_old_networks():
  gin_utils.parse_gin(["runs/finetune.gin", "sizes/tiny.gin", "models/networks_v0.gin"],
                      ["RUN_DIR = '/x'", "WARM_START = None"])
  assert gin.query_parameter("%SPAN_LAYER_NORM") is False
  assert gin.query_parameter("%SEPARATE_DOC_SEGMENTS") is False
  assert bert.BertConfig().gelu_approximate is False
  gin.clear_config()
  gin_utils.parse_gin(["runs/finetune.gin", "sizes/tiny.gin"], ["RUN_DIR = '/x'",
                                                                "WARM_START = None"])
  assert gin.query_parameter("%SPAN_LAYER_NORM") is True
  assert gin.query_parameter("%SEPARATE_DOC_SEGMENTS") is True
  assert bert.BertConfig().gelu_approximate is True
