"""The towers of a checkpoint (in Hugging Face's names) -> this project's parameter tree.

A converted run holds the top-level subtrees a trained run of this project holds, so the run
files' warm starts (`WARM_STARTS` in gin/runs/*.gin) pick from it as from any run:
  retriever   {"embedder": ...} (one shared tower) or {"query_embedder", "doc_embedder"}
  reader      a BERT encoder: the knowledge-augmented encoder, the reader, or plain BERT
  mlm_head    BERT's masked-LM head on `reader`
  span_head   ORQA's span MLP on `reader`
Towers are found by their word embeddings (`...embeddings.word_embeddings.weight`); the module
holding a BERT (one scope up: `embedder.` for `embedder.realm.`) tells its role: a projection
`cls.dense` makes it a retriever tower, `qa_outputs` a reader, anything else an encoder (with
`cls.predictions` its masked-LM head; `RealmReader` carries one too, untied and unused by its
forward pass, which is left out). Sizes are read off the weights; what the weights do
not show (heads, activation, epsilons, span width) comes from the checkpoint's config.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from realm_bench.errors import InputError
from realm_bench.networks import hf_realm

WORD = "embeddings.word_embeddings.weight"
BLOCK_EMB = "block_emb"   # the variable holding REALM / ORQA block embeddings (TF and HF)


@dataclasses.dataclass(frozen=True)
class BertSizes:
  """What a BERT's weights say about its shape (`bert.BertConfig`'s fields)."""
  vocab_size: int
  hidden_size: int
  num_layers: int
  mlp_dim: int
  max_len: int
  type_vocab_size: int


@dataclasses.dataclass
class Converted:
  """The parameter tree and what the run folder's config and record say about it."""
  params: dict[str, Any]
  retriever: BertSizes | None = None
  reader: BertSizes | None = None
  proj_dim: int | None = None
  share_embedders: bool = True
  span_hidden: int | None = None
  block_emb: np.ndarray | None = None
  initialised: list[str] = dataclasses.field(default_factory=list)


def bert_sizes(state: Mapping[str, np.ndarray], prefix: str) -> BertSizes:
  vocab, hidden = state[f"{prefix}{WORD}"].shape
  layers = 0
  while f"{prefix}encoder.layer.{layers}.attention.self.query.weight" in state:
    layers += 1
  return BertSizes(
      vocab_size=int(vocab), hidden_size=int(hidden), num_layers=layers,
      mlp_dim=int(state[f"{prefix}encoder.layer.0.intermediate.dense.weight"].shape[0]),
      max_len=int(state[f"{prefix}embeddings.position_embeddings.weight"].shape[0]),
      type_vocab_size=int(state[f"{prefix}embeddings.token_type_embeddings.weight"].shape[0]))


def _owner(bert_prefix: str) -> str:
  """`embedder.realm.` -> `embedder.`; `realm.` / `bert.` / `` -> ``."""
  stripped = bert_prefix[:-1] if bert_prefix else ""
  return stripped.rpartition(".")[0] + "." if "." in stripped else ""


def _with_pooler(state: dict, prefix: str, hidden: int, initialised: list[str],
                 seed: int) -> dict:
  """BertForMaskedLM drops the pooler; our encoder has one (the retriever reads its pooled
  [CLS]): initialise it as BERT does, N(0, 0.02) and zero bias, and say so in the record."""
  name = f"{prefix}pooler.dense.weight"
  if name in state:
    return state
  rng = np.random.default_rng(seed)
  initialised.append(f"{prefix}pooler.dense")
  return {**state, name: rng.normal(0.0, 0.02, (hidden, hidden)).astype(np.float32),
          f"{prefix}pooler.dense.bias": np.zeros((hidden,), np.float32)}


def _bert(state, prefix, heads, initialised, where):
  sizes = bert_sizes(state, prefix)
  if sizes.hidden_size % heads:
    raise InputError(f"hidden size {sizes.hidden_size} is not a multiple of "
                     f"{heads} attention heads", path=where, field="num_attention_heads")
  state = _with_pooler(state, prefix, sizes.hidden_size, initialised, seed=len(initialised))
  try:
    return hf_realm.bert_params(state, prefix, num_layers=sizes.num_layers,
                                num_heads=heads), sizes
  except KeyError as e:
    raise InputError(f"incomplete BERT under {prefix or 'the top level'!r}: {e.args[0]}",
                     path=where) from None


def _tied_output(state, owner, prefix, where) -> None:
  """Our masked-LM output layer is the word embeddings (BERT's tying); refuse another."""
  decoder = state.get(f"{owner}cls.predictions.decoder.weight")
  if decoder is not None and not np.array_equal(decoder, state[f"{prefix}{WORD}"]):
    raise InputError("the masked-LM output layer is not tied to the word embeddings "
                     "(this project's MLM head always ties them)", path=where,
                     field=f"{owner}cls.predictions.decoder.weight")


def convert_towers(state: dict[str, np.ndarray], *, heads: int, where: str) -> Converted:
  """The parameter tree of every tower in `state` (see the module docstring)."""
  prefixes = sorted(k[:-len(WORD)] for k in state if k.endswith(WORD))
  embedders, readers = [], []
  for prefix in prefixes:
    owner = _owner(prefix)
    (embedders if f"{owner}cls.dense.weight" in state else readers).append((owner, prefix))
  out = Converted(params={})
  if embedders:
    towers = {}
    for owner, prefix in embedders:
      bert, sizes = _bert(state, prefix, heads, out.initialised, where)
      try:
        towers[owner] = {"bert": bert, **hf_realm.projection_params(state, owner)}
      except KeyError as e:
        raise InputError(f"incomplete retriever projection under {owner!r}: {e.args[0]}",
                         path=where) from None
      out.retriever = sizes
    out.proj_dim = int(next(iter(towers.values()))["projection"]["kernel"].shape[1])
    if len(towers) == 1:
      out.params["retriever"] = {"embedder": next(iter(towers.values()))}
    elif set(towers) == {"embedder.", "query_embedder."}:   # RealmScorer's two towers
      same = all(np.array_equal(a, b) for a, b in zip(_leaves(towers["embedder."]),
                                                       _leaves(towers["query_embedder."])))
      if same:
        out.params["retriever"] = {"embedder": towers["embedder."]}
      else:
        out.share_embedders = False
        out.params["retriever"] = {"query_embedder": towers["query_embedder."],
                                   "doc_embedder": towers["embedder."]}
    else:
      raise InputError(f"several retriever towers ({', '.join(sorted(towers))}): convert "
                       "one checkpoint per retriever", path=where)
  if len(readers) > 1:
    raise InputError(f"several encoders ({', '.join(p or '(top level)' for _, p in readers)}):"
                     " convert one checkpoint per encoder", path=where)
  if readers:
    owner, prefix = readers[0]
    out.params["reader"], out.reader = _bert(state, prefix, heads, out.initialised, where)
    if f"{owner}qa_outputs.dense_intermediate.weight" in state:
      try:
        out.params["span_head"] = hf_realm.span_head_params(state, f"{owner}qa_outputs.")
      except KeyError as e:
        raise InputError(f"incomplete span head: {e.args[0]}", path=where) from None
      out.span_hidden = int(out.params["span_head"]["start"]["bias"].shape[0])
    elif f"{owner}cls.predictions.bias" in state:   # a reader's MLM head is never used
      _tied_output(state, owner, prefix, where)
      try:
        out.params["mlm_head"] = hf_realm.mlm_head_params(state, f"{owner}cls.predictions.")
      except KeyError as e:
        raise InputError(f"incomplete masked-LM head: {e.args[0]}", path=where) from None
  if BLOCK_EMB in state:
    out.block_emb = np.asarray(state[BLOCK_EMB], np.float32)
  if not out.params and out.block_emb is None:
    raise InputError(f"no BERT found (no parameter ending in {WORD!r}; there are e.g. "
                     f"{sorted(state)[:5]})", path=where)
  return out


def _leaves(tree) -> list[np.ndarray]:
  if isinstance(tree, dict):
    return [leaf for key in sorted(tree) for leaf in _leaves(tree[key])]
  return [tree]
