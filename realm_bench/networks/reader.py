"""The knowledge-augmented encoder's heads: masked-LM for pre-training, spans for Open-QA.

The span head follows ORQA's `read()`: score(s, e) = w . LayerNorm(ReLU(h_s W_s + h_e W_e)) + b,
one hidden layer of `hidden` units (256 at paper scale). ORQA computes [W_s; W_e] as one dense
layer and splits its output; here they are two projections, so every (start, width) pair
costs one add, and a released checkpoint's kernel and bias split into them in halves. The
LayerNorm (Keras' default epsilon, 1e-3) is ORQA's and Hugging Face's `RealmReaderProjection`'s,
and released reader checkpoints carry its parameters; `layer_norm=False` is the head this
project had before (ReLU straight into the score).
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
from jax import lax
import jax.numpy as jnp

from realm_bench.networks.bert import BertConfig, Projection

NEG_INF = -1e9


class _Weights(nn.Module):
  """Declares a layer's parameters under its usual names, without applying the layer."""
  shapes: tuple[tuple[str, tuple[int, ...], Any], ...]   # (name, shape, initializer)

  @nn.compact
  def __call__(self):
    return {name: self.param(name, init, shape, jnp.float32) for name, shape, init in self.shapes}


class _LayerNormWeights(nn.Module):
  """`.../norm/{scale, bias}`: the path `bert.LayerNorm` (a wrapper of flax's) keeps them at."""
  size: int
  axis: str

  @nn.compact
  def __call__(self):
    return _Weights((
        ("scale", (self.size,), nn.with_logical_partitioning(nn.initializers.ones, (self.axis,))),
        ("bias", (self.size,), nn.with_logical_partitioning(nn.initializers.zeros, (self.axis,))),
    ), name="norm")()


class SpanHead(nn.Module):
  config: BertConfig
  hidden: int = 256
  max_span_len: int = 10
  layer_norm: bool = True
  norm_eps: float = 1e-3

  @nn.compact
  def __call__(self, hidden_states, positions=None):
    """[..., L, H] -> span logits [..., L, W]: span (i, i + w) for width w < max_span_len.

    positions [..., P]: the spans over those positions only, [..., P, W]. Open-QA's spans never
    leave the block's body, so its head reads the body alone; the [..., P, W, hidden]
    activations are a large part of a fine-tuning step (E119).
    """
    cfg = self.config
    if positions is not None:
      hidden_states = jnp.take_along_axis(hidden_states, positions[..., None], axis=-2)
    start = Projection(cfg, (self.hidden,), ("embed", "mlp"), name="start")(hidden_states)
    end = Projection(cfg, (self.hidden,), ("embed", "mlp"), name="end")(hidden_states)
    length = hidden_states.shape[-2]
    pad = [(0, 0)] * (end.ndim - 2) + [(0, self.max_span_len), (0, 0)]
    # ends[..., i, w, :] = end[..., i + w, :], one gather (its gradient one scatter-add).
    ends = jnp.pad(end, pad)[..., jnp.arange(length)[:, None] + jnp.arange(self.max_span_len), :]
    h = nn.relu(start[..., :, None, :] + ends)
    if not self.layer_norm:
      return Projection(cfg, (1,), ("mlp", None), name="score")(h)[..., 0]
    # score = w . LayerNorm(h) + c, computed as (a . h - mean(h) sum(a)) / std(h) + (w . beta +
    # c) with a = w * gamma: the same function and parameters in three reductions over h. The
    # layer-by-layer form keeps the normalised [..., L, W, hidden] tensor and its gradients,
    # which made this head 3x slower (E119).
    h = h.astype(jnp.float32)
    norm = _LayerNormWeights(self.hidden, "mlp", name="hidden_norm")()
    score = _Weights((
        ("kernel", (self.hidden, 1),
         nn.with_logical_partitioning(nn.initializers.normal(cfg.init_std), ("mlp", None))),
        ("bias", (1,), nn.with_logical_partitioning(nn.initializers.zeros, (None,))),
    ), name="score")()
    w = score["kernel"][:, 0]
    a = w * norm["scale"]
    mean = jnp.mean(h, axis=-1)
    var = jnp.mean(jnp.square(h - mean[..., None]), axis=-1)
    offset = norm["bias"] @ w + score["bias"][0]
    return (jnp.einsum("...k,k->...", h, a) - mean * jnp.sum(a)) * lax.rsqrt(
        var + self.norm_eps) + offset


def span_validity(length: int, max_span_len: int, region_start, region_len):
  """Boolean [..., L, W]: span (i, i+w) lies inside [region_start, region_start+region_len).

  Spans never cross the block boundary: both ends must be inside the block body.
  """
  pos = jnp.arange(length)[:, None]
  width = jnp.arange(max_span_len)[None, :]
  start = region_start[..., None, None]
  stop = (region_start + region_len)[..., None, None]
  return (pos >= start) & (pos + width < stop)
