"""REALM's retriever towers: BERT pooled [CLS] -> dense(proj_dim) -> LayerNorm.

The released REALM code shares one embedder between queries and documents by default; the
`share_embedders` switch gives the two-tower variant. Relevance is the inner product.

Segments. A query is one segment (all 0). A document is `[CLS] title [SEP] body [SEP]` and is
two: REALM's featurizer (`featurize_document`, on by its flag `separate_candidate_segments`)
and ORQA's ICT (`block_segment_ids`) give [CLS], the title and the first [SEP] segment 0 and
the body with its [SEP] segment 1, so released embedders learned their document embeddings
with the body's type embedding. Every document input in this project has that layout, so the
segment ids are a function of the ids (`document_segment_ids`) and are computed here, in the
tower, rather than carried next to the ids by every path that embeds documents (the refresh,
the asynchronous builder, streamed index builds, evaluation, benchmarks).
"""
from __future__ import annotations

import flax.linen as nn
import jax.numpy as jnp

from realm_bench.networks.bert import BertConfig, BertEncoder, LayerNorm, Projection


def document_segment_ids(ids, sep_id: int):
  """Segment ids of `[CLS] title [SEP] body [SEP]` rows ([..., L] ids, 0 = padding):
  1 after the first [SEP] (the body and its [SEP]), 0 up to it and on padding."""
  is_sep = (ids == sep_id).astype(jnp.int32)
  seps_before = jnp.cumsum(is_sep, axis=-1) - is_sep
  return jnp.where((seps_before > 0) & (ids > 0), 1, 0).astype(jnp.int32)


class Embedder(nn.Module):
  """`norm_eps` None: the encoder's LayerNorm epsilon, as REALM (and Hugging Face's
  `RealmScorerProjection`) use; ORQA's ICT module uses Keras' default, 1e-3."""
  config: BertConfig
  proj_dim: int = 128
  norm_eps: float | None = None

  @nn.compact
  def __call__(self, ids, type_ids=None, *, deterministic: bool = True):
    _, pooled = BertEncoder(self.config, name="bert")(ids, type_ids,
                                                      deterministic=deterministic)
    x = Projection(self.config, (self.proj_dim,), ("embed", None), name="projection")(pooled)
    eps = self.config.layer_norm_eps if self.norm_eps is None else self.norm_eps
    return LayerNorm(eps, name="projection_norm")(x)


class Retriever(nn.Module):
  """Holds the query and document towers (one module when shared).

  `doc_sep_id`: the [SEP] id that splits a document's title from its body (see the module
  docstring); None gives documents a single segment, as this project did before.
  """
  config: BertConfig
  proj_dim: int = 128
  share_embedders: bool = True
  doc_sep_id: int | None = None
  norm_eps: float | None = None

  def setup(self):
    if self.share_embedders:
      self.embedder = Embedder(self.config, self.proj_dim, self.norm_eps)
    else:
      self.query_embedder = Embedder(self.config, self.proj_dim, self.norm_eps)
      self.doc_embedder = Embedder(self.config, self.proj_dim, self.norm_eps)

  def embed_query(self, ids, *, deterministic: bool = True):
    tower = self.embedder if self.share_embedders else self.query_embedder
    return tower(ids, deterministic=deterministic)

  def embed_docs(self, ids, *, deterministic: bool = True):
    tower = self.embedder if self.share_embedders else self.doc_embedder
    types = None if self.doc_sep_id is None else document_segment_ids(ids, self.doc_sep_id)
    return tower(ids, types, deterministic=deterministic)

  def __call__(self, query_ids, doc_ids, *, deterministic: bool = True):
    return (self.embed_query(query_ids, deterministic=deterministic),
            self.embed_docs(doc_ids, deterministic=deterministic))


def inner_products(query_emb, doc_emb):
  """[B, D] x [B, N, D] -> [B, N] relevance scores f(x, z)."""
  return jnp.einsum("bd,bnd->bn", query_emb, doc_emb)
