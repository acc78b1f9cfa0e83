"""`realm-bench convert` from TF checkpoints against Hugging Face's forward passes: a random HF
model's weights are written under the TF names of Google's BERT release and of REALM's
embedder export (kernels transposed back to TF's [in, out]), converted, and our networks'
outputs compared with the HF model's on the same inputs (no TF BERT implementation needed)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
hf = pytest.importorskip("transformers.models.deprecated.realm")

import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position

from realm_bench.models import MlmNet  # pylint: disable=g-import-not-at-top
from realm_bench.networks.embedder import Embedder, document_segment_ids  # pylint: disable=g-import-not-at-top
from tests import tf_checkpoints as tfc  # pylint: disable=g-import-not-at-top
from tests.parity import test_convert_hf as h  # pylint: disable=g-import-not-at-top

pytestmark = pytest.mark.parity


def tf_names(state, *, hf_prefix, tf_scope, extra=()):
  """HF state dict entries under `hf_prefix` -> TF variables of Google's BERT under `tf_scope`."""
  out = {}
  for name, value in state.items():
    if not name.startswith(hf_prefix) or "position_ids" in name or "decoder" in name:
      continue
    value = value.numpy().copy()
    if name == f"{hf_prefix}predictions.bias":   # the MLM output layer's bias
      out[f"{tf_scope}predictions/output_bias"] = value
      continue
    parts = name[len(hf_prefix):].split(".")
    leaf = parts.pop()
    is_norm = "LayerNorm" in parts
    if parts[-1].endswith("_embeddings"):
      tf_leaf = None
    elif leaf == "weight":
      tf_leaf = "gamma" if is_norm else "kernel"
    else:
      tf_leaf = "beta" if is_norm else "bias"
    if tf_leaf == "kernel":
      value = value.T.copy()
    path = "/".join(parts).replace("layer/", "layer_")
    out[f"{tf_scope}{path}" + (f"/{tf_leaf}" if tf_leaf else "")] = value
  return out


def test_google_bert_checkpoint_against_hf(tmp_path, parity_errors):
  model = h.randomised(transformers.BertForMaskedLM(h.bert_config(hidden_act="gelu_new")), 11)
  state = model.state_dict()
  tf_vars = {**tf_names(state, hf_prefix="bert.", tf_scope="bert/"),
             **tf_names(state, hf_prefix="cls.", tf_scope="cls/")}
  assert "cls/predictions/output_bias" in tf_vars and "bert/encoder/layer_1/output/dense/kernel" in tf_vars
  tf_vars["bert/pooler/dense/kernel"] = np.eye(h.HIDDEN, dtype=np.float32)   # HF's MLM has none
  tf_vars["bert/pooler/dense/bias"] = np.zeros(h.HIDDEN, np.float32)
  tfc.write_checkpoint(tmp_path / "bert" / "bert_model.ckpt", tf_vars)
  tfc.write_bert_config(tmp_path / "bert" / "bert_config.json", vocab=h.VOCAB, hidden=h.HIDDEN,
                        layers=h.LAYERS, heads=h.HEADS, mlp=h.MLP, max_len=h.MAX_LEN)
  (tmp_path / "bert" / "vocab.txt").write_text("\n".join(h.vocab_lines()) + "\n")
  _, params = h.convert(tmp_path, "tf-bert", tmp_path / "bert")
  ids = h.inputs(5)
  positions = np.array([[1, 2, 8], [3, 5, 7]], np.int32)
  logits = MlmNet(h.ours()).apply({"params": params}, jnp.asarray(ids), jnp.asarray(positions))
  with torch.no_grad():
    theirs = model(input_ids=h.t(ids), attention_mask=h.t(ids > 0)).logits.numpy()
  h.check(parity_errors, "convert tf-bert: MLM logits", logits,
          np.take_along_axis(theirs, positions[..., None], axis=1))


def test_realm_embedder_export_against_hf(tmp_path, parity_errors):
  model = h.randomised(hf.RealmEmbedder(h.realm_config()), 12)
  state = model.state_dict()
  tf_vars = tf_names(state, hf_prefix="realm.", tf_scope="module/module/module/bert/")
  for part in ("dense", "LayerNorm"):
    weight, bias = state[f"cls.{part}.weight"].numpy(), state[f"cls.{part}.bias"].numpy()
    leaf = ("kernel", "bias") if part == "dense" else ("gamma", "beta")
    tf_vars[f"module/module/{part}/{leaf[0]}"] = weight.T.copy() if part == "dense" else weight
    tf_vars[f"module/module/{part}/{leaf[1]}"] = bias
  tfc.write_checkpoint(tmp_path / "embedder" / "variables" / "variables", tf_vars)
  tfc.write_bert_config(tmp_path / "embedder" / "bert_config.json", vocab=h.VOCAB,
                        hidden=h.HIDDEN, layers=h.LAYERS, heads=h.HEADS, mlp=h.MLP,
                        max_len=h.MAX_LEN)
  (tmp_path / "embedder" / "assets").mkdir()
  (tmp_path / "embedder" / "assets" / "vocab.txt").write_text("\n".join(h.vocab_lines()) + "\n")
  _, params = h.convert(tmp_path, "tf-realm", tmp_path / "embedder")
  ids = h.inputs(6)
  types = np.asarray(document_segment_ids(jnp.asarray(ids), h.SEP))
  emb = Embedder(h.ours(), h.PROJ).apply({"params": params["retriever"]["embedder"]},
                                         jnp.asarray(ids), jnp.asarray(types))
  with torch.no_grad():
    theirs = model(input_ids=h.t(ids), attention_mask=h.t(ids > 0),
                   token_type_ids=h.t(types)).projected_score.numpy()
  h.check(parity_errors, "convert tf-realm: document embedding", emb, theirs)
