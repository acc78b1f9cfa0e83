"""REALM's retriever towers: BERT pooled [CLS] -> dense(proj_dim) -> LayerNorm.

The released REALM code shares one embedder between queries and documents by default; the
`share_embedders` switch gives the two-tower variant. Relevance is the inner product.
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from realm_bench.networks.bert import BertConfig, BertEncoder, LayerNorm, Projection


class Embedder(nn.Module):
  config: BertConfig
  proj_dim: int = 128

  @nn.compact
  def __call__(self, ids, *, deterministic: bool = True):
    _, pooled = BertEncoder(self.config, name="bert")(ids, deterministic=deterministic)
    x = Projection(self.config, (self.proj_dim,), ("embed", None), name="projection")(pooled)
    return LayerNorm(name="projection_norm")(x)


class Retriever(nn.Module):
  """Holds the query and document towers (one module when shared)."""
  config: BertConfig
  proj_dim: int = 128
  share_embedders: bool = True

  def setup(self):
    if self.share_embedders:
      self.embedder = Embedder(self.config, self.proj_dim)
    else:
      self.query_embedder = Embedder(self.config, self.proj_dim)
      self.doc_embedder = Embedder(self.config, self.proj_dim)

  def embed_query(self, ids, *, deterministic: bool = True):
    tower = self.embedder if self.share_embedders else self.query_embedder
    return tower(ids, deterministic=deterministic)

  def embed_docs(self, ids, *, deterministic: bool = True):
    tower = self.embedder if self.share_embedders else self.doc_embedder
    return tower(ids, deterministic=deterministic)

  def __call__(self, query_ids, doc_ids, *, deterministic: bool = True):
    return (self.embed_query(query_ids, deterministic=deterministic),
            self.embed_docs(doc_ids, deterministic=deterministic))


def inner_products(query_emb, doc_emb):
  """[B, D] x [B, N, D] -> [B, N] relevance scores f(x, z)."""
  return jnp.einsum("bd,bnd->bn", query_emb, doc_emb)
