"""Hugging Face REALM parameter names -> this project's parameter trees.

The parity tests (tests/parity) copy the weights of `transformers`' REALM classes into our
networks with these functions and compare the forward passes; importing released checkpoints
saved in that layout needs the same map. They take a state dict as numpy arrays
({name: array}, e.g. `{k: v.numpy() for k, v in model.state_dict().items()}`), so neither
torch nor transformers is needed to use them.

Layout differences: a torch `Linear` stores weight [out, in] and we store kernel [in, out];
our attention kernels keep heads apart ([H, heads, head_dim], and [heads, head_dim, H] for the
output); Hugging Face's span head (`RealmReaderProjection.dense_intermediate`, like ORQA's)
is one dense layer whose output halves are the start and end projections, ours two layers,
so its kernel and bias are split in halves.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

State = Mapping[str, np.ndarray]


def _get(state: State, name: str) -> np.ndarray:
  if name not in state:
    raise KeyError(f"no parameter {name!r} in the state dict (it has e.g. "
                   f"{sorted(state)[:5]})")
  return np.asarray(state[name], np.float32)


def _dense(state: State, name: str) -> dict:
  return {"kernel": _get(state, f"{name}.weight").T, "bias": _get(state, f"{name}.bias")}


def _norm(state: State, name: str) -> dict:
  return {"norm": {"scale": _get(state, f"{name}.weight"), "bias": _get(state, f"{name}.bias")}}


def bert_params(state: State, prefix: str, *, num_layers: int, num_heads: int) -> dict:
  """`BertEncoder` parameters from a `RealmBertModel` (or `BertModel`) under `prefix`
  (e.g. "realm.", "embedder.realm.")."""
  p = prefix
  out = {
      "token_embed": {"embedding": _get(state, f"{p}embeddings.word_embeddings.weight")},
      "position_embed": _get(state, f"{p}embeddings.position_embeddings.weight"),
      "type_embed": _get(state, f"{p}embeddings.token_type_embeddings.weight"),
      "embed_norm": _norm(state, f"{p}embeddings.LayerNorm"),
      "pooler": _dense(state, f"{p}pooler.dense"),
  }
  for i in range(num_layers):
    layer = f"{p}encoder.layer.{i}."
    hidden = _get(state, f"{layer}attention.self.query.weight").shape[1]
    head_dim = hidden // num_heads
    attention = {}
    for part in ("query", "key", "value"):
      dense = _dense(state, f"{layer}attention.self.{part}")
      attention[part] = {"kernel": dense["kernel"].reshape(hidden, num_heads, head_dim),
                         "bias": dense["bias"].reshape(num_heads, head_dim)}
    out_dense = _dense(state, f"{layer}attention.output.dense")
    attention["out"] = {"kernel": out_dense["kernel"].reshape(num_heads, head_dim, hidden),
                        "bias": out_dense["bias"]}
    out[f"layer_{i}"] = {
        "attention": attention,
        "attention_norm": _norm(state, f"{layer}attention.output.LayerNorm"),
        "mlp_in": _dense(state, f"{layer}intermediate.dense"),
        "mlp_out": _dense(state, f"{layer}output.dense"),
        "mlp_norm": _norm(state, f"{layer}output.LayerNorm"),
    }
  return out


def embedder_params(state: State, prefix: str, *, num_layers: int, num_heads: int) -> dict:
  """`Embedder` parameters from a `RealmEmbedder` under `prefix` ("" for the class itself,
  "embedder." / "query_embedder." inside `RealmScorer`). Its `cls.predictions` (an MLM head
  that the embedder's forward pass never uses) has no counterpart here."""
  return {"bert": bert_params(state, f"{prefix}realm.", num_layers=num_layers,
                              num_heads=num_heads),
          **projection_params(state, prefix)}


def projection_params(state: State, prefix: str) -> dict:
  """The retriever tower's head, `RealmScorerProjection`'s dense and LayerNorm under
  `prefix`: the `Embedder` parameters besides its "bert"."""
  return {"projection": _dense(state, f"{prefix}cls.dense"),
          "projection_norm": _norm(state, f"{prefix}cls.LayerNorm")}


def mlm_head_params(state: State, prefix: str = "cls.predictions.") -> dict:
  """`MlmHead` parameters from `RealmOnlyMLMHead.predictions` (the output layer is tied to
  the word embeddings in both, so only its bias is here)."""
  return {"transform": _dense(state, f"{prefix}transform.dense"),
          "transform_norm": _norm(state, f"{prefix}transform.LayerNorm"),
          "output_bias": _get(state, f"{prefix}bias")}


def span_head_params(state: State, prefix: str = "qa_outputs.") -> dict:
  """`SpanHead` parameters from `RealmReaderProjection` (ORQA's span MLP)."""
  both = _dense(state, f"{prefix}dense_intermediate")
  hidden = both["bias"].shape[0] // 2
  return {"start": {"kernel": both["kernel"][:, :hidden], "bias": both["bias"][:hidden]},
          "end": {"kernel": both["kernel"][:, hidden:], "bias": both["bias"][hidden:]},
          "hidden_norm": _norm(state, f"{prefix}layer_normalization"),
          "score": _dense(state, f"{prefix}dense_output")}
