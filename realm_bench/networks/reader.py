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

import flax.linen as nn
import jax.numpy as jnp

from realm_bench.networks.bert import BertConfig, LayerNorm, Projection

NEG_INF = -1e9


class SpanHead(nn.Module):
  config: BertConfig
  hidden: int = 256
  max_span_len: int = 10
  layer_norm: bool = True
  norm_eps: float = 1e-3

  @nn.compact
  def __call__(self, hidden_states):
    """[..., L, H] -> span logits [..., L, W]: span (i, i + w) for width w < max_span_len."""
    cfg = self.config
    start = Projection(cfg, (self.hidden,), ("embed", "mlp"), name="start")(hidden_states)
    end = Projection(cfg, (self.hidden,), ("embed", "mlp"), name="end")(hidden_states)
    length = hidden_states.shape[-2]
    pad = [(0, 0)] * (end.ndim - 2) + [(0, self.max_span_len), (0, 0)]
    end = jnp.pad(end, pad)
    # ends[..., i, w, :] = end[..., i + w, :]
    ends = jnp.stack([end[..., w:w + length, :] for w in range(self.max_span_len)], axis=-2)
    h = nn.relu(start[..., :, None, :] + ends)
    if self.layer_norm:
      h = LayerNorm(self.norm_eps, axis="mlp", name="hidden_norm")(h)
    out = Projection(cfg, (1,), ("mlp", None), name="score")(h)
    return out[..., 0]


def span_validity(length: int, max_span_len: int, region_start, region_len):
  """Boolean [..., L, W]: span (i, i+w) lies inside [region_start, region_start+region_len).

  Spans never cross the block boundary: both ends must be inside the block body.
  """
  pos = jnp.arange(length)[:, None]
  width = jnp.arange(max_span_len)[None, :]
  start = region_start[..., None, None]
  stop = (region_start + region_len)[..., None, None]
  return (pos >= start) & (pos + width < stop)
