"""The knowledge-augmented encoder's heads: masked-LM for pre-training, spans for Open-QA.

The span head follows ORQA: score(s, e) = MLP([h_s; h_e]) with one hidden layer (256 at paper
scale). The first layer is split into start and end halves so that every (start, width) pair
costs one add instead of a concatenation: [h_s; h_e] W = h_s W_s + h_e W_e.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from realm_bench.networks.bert import BertConfig, Projection

NEG_INF = -1e9


class SpanHead(nn.Module):
  config: BertConfig
  hidden: int = 256
  max_span_len: int = 10

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
