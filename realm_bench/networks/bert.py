"""A BERT encoder in Flax, annotated with logical axis names for partitioning.

Written for this project (post-LayerNorm BERT, learned positions, GELU). Every kernel carries
logical axis names ("embed", "mlp", "heads", "kv", "vocab") that `partitioning.Partitioner`
maps onto the ("data", "model") mesh, so the same module runs on one CPU core or a pod slice.

Mixed precision: `dtype` is the dtype matmul *inputs* are cast to. With `accumulate_fp32`
the dots ask XLA for float32 results (`preferred_element_type`), in the backward pass too
(`einsum` below), which is what makes bf16 fast on CPUs with AVX-512 BF16 (bf16 x bf16 ->
f32); plain bf16-output dots are kept as an option because benchmarks/train_step.py measures
both. Parameters stay float32.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import flax.linen as nn
import gin
import jax
import jax.numpy as jnp

NEG_INF = -1e9


@gin.configurable
@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Sizes live in gin/sizes/*.gin; vocab_size is filled in from the vocabulary."""
  vocab_size: int = 0
  hidden_size: int = 768
  num_layers: int = 12
  num_heads: int = 12
  mlp_dim: int = 3072
  max_len: int = 512
  type_vocab_size: int = 2
  dropout_rate: float = 0.1
  dtype: str = "float32"
  accumulate_fp32: bool = True
  # BERT initialises every kernel and embedding with N(0, 0.02). Small models trained from
  # scratch need more: at 0.02 and width 128 a pooled [CLS] barely depends on its input.
  init_std: float = 0.02
  # The original TF BERT, REALM and ORQA use GELU's tanh approximation (Hugging Face's
  # `gelu_new`, REALM's default activation), so their checkpoints compute it; False is the
  # exact erf form (Hugging Face's `gelu`), which this project used before.
  gelu_approximate: bool = True
  # Every LayerNorm of the encoder and of the masked-LM head: TF BERT and REALM use 1e-12.
  layer_norm_eps: float = 1e-12
  # Activation checkpointing: each transformer layer's activations are recomputed in the
  # backward pass instead of kept. Values are unchanged; at base size on XLA:CPU it costs 26%
  # more FLOPs and, unrolled, does not lower the step's memory; inside `scan_layers` it does
  # (12.6 -> 4.6 GiB at batch 1: benchmarks/README.md, step_memory).
  remat: bool = False
  # The layer stack as one `nn.scan` over a single layer (t5x/flaxformer's scan_layers): XLA
  # compiles one layer body instead of num_layers copies, and with `remat` the backward pass
  # keeps one layer's activations at a time. Parameters are then stacked on a leading
  # "layers" axis under `layers/` instead of `layer_0` ... `layer_{n-1}`: a different tree,
  # so runs of the two layouts load into each other only through `networks/layer_stack.py`.
  scan_layers: bool = False

  @property
  def compute_dtype(self):
    return jnp.dtype(self.dtype)


def einsum(config: BertConfig, eq: str, a, b):
  """A two-operand einsum in the config's precision; results (and gradients) in float32.

  float32: a plain einsum. bfloat16 with accumulate_fp32: bf16 x bf16 -> f32 in the backward
  pass too (JAX's own rule pairs the f32 cotangent with a bf16 operand, so XLA falls back to
  f32 dots). bfloat16 without accumulate_fp32: plain bf16-output dots.
  """
  dtype = config.compute_dtype
  if dtype == jnp.float32:
    return jnp.einsum(eq, a, b)
  if not config.accumulate_fp32:
    return jnp.einsum(eq, a.astype(dtype), b.astype(dtype)).astype(jnp.float32)
  return _mixed_einsum(eq, dtype.name, a, b)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _mixed_einsum(eq, dtype, a, b):
  return jnp.einsum(eq, a.astype(dtype), b.astype(dtype), preferred_element_type=jnp.float32)


def _mixed_einsum_fwd(eq, dtype, a, b):
  return _mixed_einsum(eq, dtype, a, b), (a, b)


def _mixed_einsum_bwd(eq, dtype, residuals, g):
  a, b = residuals
  inputs, out = eq.split("->")
  spec_a, spec_b = inputs.split(",")
  g = g.astype(dtype)
  # Every letter of a operand appears in the output or in the other operand, so each
  # gradient is one einsum of the cotangent with the other operand.
  grad_a = jnp.einsum(f"{out},{spec_b}->{spec_a}", g, b.astype(dtype),
                      preferred_element_type=jnp.float32)
  grad_b = jnp.einsum(f"{spec_a},{out}->{spec_b}", a.astype(dtype), g,
                      preferred_element_type=jnp.float32)
  return grad_a.astype(a.dtype), grad_b.astype(b.dtype)


_mixed_einsum.defvjp(_mixed_einsum_fwd, _mixed_einsum_bwd)


def _init(axes: Sequence[str | None], stddev: float):
  return nn.with_logical_partitioning(nn.initializers.normal(stddev), tuple(axes))


class Projection(nn.Module):
  """y = einsum(x, kernel) + bias, with logically named kernel axes."""
  config: BertConfig
  shape: tuple[int, ...]          # kernel shape after the contracted input axes
  axes: tuple[str | None, ...]    # logical names of all kernel axes (inputs then outputs)
  contract: int = 1               # how many trailing input axes are contracted

  @nn.compact
  def __call__(self, x):
    cfg = self.config
    in_shape = x.shape[-self.contract:]
    kernel = self.param("kernel", _init(self.axes, cfg.init_std), tuple(in_shape) + tuple(self.shape),
                        jnp.float32)
    bias = self.param("bias", nn.with_logical_partitioning(
        nn.initializers.zeros, self.axes[self.contract:]), tuple(self.shape), jnp.float32)
    batch = "abcdefgh"[:x.ndim - self.contract]
    contracted = "wxyz"[:self.contract]
    out = "pqrs"[:len(self.shape)]
    return einsum(cfg, f"{batch}{contracted},{contracted}{out}->{batch}{out}", x, kernel) + bias


def gelu(config: BertConfig, x):
  """BERT's activation, in the form the config names (see `BertConfig.gelu_approximate`)."""
  return nn.gelu(x, approximate=config.gelu_approximate)


class LayerNorm(nn.Module):
  """LayerNorm over the last axis, in float32; `axis` is that axis's logical name."""
  epsilon: float = 1e-12
  axis: str = "embed"

  @nn.compact
  def __call__(self, x):
    return nn.LayerNorm(epsilon=self.epsilon, dtype=jnp.float32,
                        scale_init=nn.with_logical_partitioning(nn.initializers.ones, (self.axis,)),
                        bias_init=nn.with_logical_partitioning(nn.initializers.zeros, (self.axis,)),
                        name="norm")(x)


class SelfAttention(nn.Module):
  config: BertConfig

  @nn.compact
  def __call__(self, x, attention_bias, deterministic: bool):
    cfg = self.config
    head_dim = cfg.hidden_size // cfg.num_heads
    qkv_axes = ("embed", "heads", "kv")
    q = Projection(cfg, (cfg.num_heads, head_dim), qkv_axes, name="query")(x)
    k = Projection(cfg, (cfg.num_heads, head_dim), qkv_axes, name="key")(x)
    v = Projection(cfg, (cfg.num_heads, head_dim), qkv_axes, name="value")(x)
    if cfg.compute_dtype != jnp.float32 and cfg.accumulate_fp32:
      # Heads first ([batch, heads, length, head_dim]) so that every dot of the forward and
      # backward passes is a batched matmul with the batch axes leading: XLA:CPU has a
      # bf16 x bf16 -> f32 kernel for that layout, not for all of those of the [b, l, h, d]
      # einsums below (the key gradient "bqhd,bhqk->bkhd" fails with "Unsupported element
      # type for DotThunk"). float32 keeps the layout its records were made with.
      q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
      eq_logits, eq_ctx = "bhqd,bhkd->bhqk", "bhqk,bhkd->bhqd"
    else:
      eq_logits, eq_ctx = "bqhd,bkhd->bhqk", "bhqk,bkhd->bqhd"
    logits = einsum(cfg, eq_logits, q, k) / jnp.sqrt(head_dim)
    weights = jax.nn.softmax(logits + attention_bias, axis=-1)
    weights = nn.Dropout(cfg.dropout_rate)(weights, deterministic=deterministic)
    ctx = einsum(cfg, eq_ctx, weights, v)
    if eq_ctx.endswith("bhqd"):
      ctx = ctx.transpose(0, 2, 1, 3)
    return Projection(cfg, (cfg.hidden_size,), ("heads", "kv", "embed"), contract=2,
                      name="out")(ctx)


class TransformerLayer(nn.Module):
  config: BertConfig
  # Under nn.scan a layer's output is the scan's carry, paired with a per-layer output (none).
  scanned: bool = False

  @nn.compact
  def __call__(self, x, attention_bias, deterministic: bool):
    cfg = self.config
    drop = nn.Dropout(cfg.dropout_rate)
    h = SelfAttention(cfg, name="attention")(x, attention_bias, deterministic)
    x = LayerNorm(cfg.layer_norm_eps, name="attention_norm")(
        x + drop(h, deterministic=deterministic))
    h = Projection(cfg, (cfg.mlp_dim,), ("embed", "mlp"), name="mlp_in")(x)
    h = gelu(cfg, h)
    h = Projection(cfg, (cfg.hidden_size,), ("mlp", "embed"), name="mlp_out")(h)
    x = LayerNorm(cfg.layer_norm_eps, name="mlp_norm")(x + drop(h, deterministic=deterministic))
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    return (x, None) if self.scanned else x


def scanned_layers(cfg: BertConfig, name: str) -> nn.Module:
  """All layers as one scanned module: remat inside scan (flaxformer's order, so each scan
  step is checkpointed), params stacked on axis 0 named "layers", and a fresh params and
  dropout key per layer, as the unscanned stack's per-layer scopes have."""
  layer = TransformerLayer
  if cfg.remat:
    # prevent_cse=False: inside scan, XLA cannot merge the recomputation into the forward pass.
    layer = nn.remat(layer, static_argnums=(3,), prevent_cse=False)
  layer = nn.scan(layer, variable_axes={"params": 0},
                  split_rngs={"params": True, "dropout": True},
                  in_axes=(nn.broadcast, nn.broadcast), length=cfg.num_layers,
                  metadata_params={nn.PARTITION_NAME: "layers"})
  return layer(cfg, scanned=True, name=name)


class BertEncoder(nn.Module):
  """Returns (sequence output [..., L, H], pooled [CLS] output [..., H]).

  Leading dimensions beyond one batch axis (e.g. [batch, candidates, length]) are flattened
  internally, so callers can pass REALM's candidate tensors as they are.
  """
  config: BertConfig

  def setup(self):
    cfg = self.config
    self.token_embed = nn.Embed(
        cfg.vocab_size, cfg.hidden_size,
        embedding_init=_init(("vocab", "embed"), cfg.init_std), name="token_embed")
    self.position_embed = self.param("position_embed", _init(("length", "embed"), cfg.init_std),
                                     (cfg.max_len, cfg.hidden_size), jnp.float32)
    self.type_embed = self.param("type_embed", _init((None, "embed"), cfg.init_std),
                                 (cfg.type_vocab_size, cfg.hidden_size), jnp.float32)
    self.embed_norm = LayerNorm(cfg.layer_norm_eps)
    if cfg.scan_layers:
      self.layers = scanned_layers(cfg, "layers")
    else:
      # `deterministic` (argument 2) is a Python bool: static, so remat traces each branch once.
      layer = (nn.remat(TransformerLayer, static_argnums=(3,)) if cfg.remat
               else TransformerLayer)
      self.layers = [layer(cfg, name=f"layer_{i}") for i in range(cfg.num_layers)]
    self.pooler = Projection(cfg, (cfg.hidden_size,), ("embed", "mlp"))
    self.dropout = nn.Dropout(cfg.dropout_rate)

  def __call__(self, ids, type_ids=None, *, deterministic: bool = True):
    cfg = self.config
    lead, length = ids.shape[:-1], ids.shape[-1]
    if length > cfg.max_len:
      raise ValueError(f"sequence length {length} exceeds BertConfig.max_len={cfg.max_len}")
    ids = ids.reshape(-1, length)
    type_ids = jnp.zeros_like(ids) if type_ids is None else type_ids.reshape(-1, length)
    x = (self.token_embed(ids) + self.position_embed[None, :length]
         + jnp.take(self.type_embed, type_ids, axis=0))
    x = self.dropout(self.embed_norm(x), deterministic=deterministic)
    x = nn.with_logical_constraint(x, ("batch", "length", "embed"))
    # Padding (id 0) is never attended to.
    attention_bias = jnp.where(ids[:, None, None, :] > 0, 0.0, NEG_INF)
    if cfg.scan_layers:
      x, _ = self.layers(x, attention_bias, deterministic)
    else:
      for layer in self.layers:
        x = layer(x, attention_bias, deterministic)
    pooled = jnp.tanh(self.pooler(x[:, 0]))
    return (x.reshape(*lead, length, cfg.hidden_size),
            pooled.reshape(*lead, cfg.hidden_size))

  def mlm_logits(self, hidden):
    """Output layer tied to the input embeddings, as BERT's MLM head is."""
    return self.token_embed.attend(hidden.astype(jnp.float32))


class MlmHead(nn.Module):
  """BERT's transform (dense, GELU, LayerNorm) before the tied output projection."""
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, encoder: BertEncoder):
    cfg = self.config
    h = Projection(cfg, (cfg.hidden_size,), ("embed", "mlp"), name="transform")(hidden)
    h = LayerNorm(cfg.layer_norm_eps, name="transform_norm")(gelu(cfg, h))
    bias = self.param("output_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("vocab",)), (cfg.vocab_size,), jnp.float32)
    return encoder.mlm_logits(h) + bias
