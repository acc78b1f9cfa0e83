"""Reading TF checkpoints of BERT, REALM and ORQA, renamed to Hugging Face's parameter names.

The variables are renamed rather than mapped onto our trees directly, so one map
(`networks/hf_realm.py`, the one the parity tests check against Hugging Face's forward passes)
serves both sources. TF kernels are [in, out] and torch weights [out, in]: kernels are
transposed here and back in that map (cheap next to reading the file).

Where the towers sit in a checkpoint depends on how it was made (verified from the public
code: Google's BERT `modeling.py`, and the variable names Hugging Face's REALM loader
`load_tf_weights_in_realm` rewrites; not against a downloaded checkpoint):
- Google's BERT release: `bert/...` and `cls/predictions/...` at the top.
- REALM's knowledge-augmented encoder export (`cc_news_pretrained/bert`): the same names.
- A retriever: a BERT whose `bert/` sits under one or more `module/` scopes (a TF-Hub module
  inside another), and one scope up from it the projection `dense/` and its `LayerNorm/`
  (Keras' `layer_normalization/` accepted too), e.g. `module/module/module/bert/...` with
  `module/module/dense/kernel` in REALM's pre-trained checkpoints.
- ORQA's / REALM's fine-tuned reader: `reader/module/bert/...`, and one scope up the span MLP
  `reader/dense/` ([H, 2 * span_hidden], start half then end half), `reader/layer_normalization/`
  and `reader/dense_1/` (the score).
So every BERT is found by its `bert/embeddings/word_embeddings`, whatever the scopes above it,
and its head is looked for one scope up. Optimizer slots (`adam_m`, `adam_v`) and `global_step`
are skipped.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from realm_bench.errors import InputError

WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
from realm_bench.convert.towers import BLOCK_EMB  # pylint: disable=g-import-not-at-top
_SKIP = re.compile(r"(^|/)(adam_m|adam_v|AdamWeightDecayOptimizer(_\d+)?|global_step|"
                   r"beta1_power|beta2_power)($|/)")


def checkpoint_prefix(path: Path) -> str:
  """The checkpoint prefix `tf.train.load_checkpoint` takes, from what a user may pass: the
  prefix itself (`bert_model.ckpt`), a folder with a `checkpoint` file, a folder holding one
  `*.ckpt.index`, or a TF-Hub module folder (`variables/variables.index`)."""
  from realm_bench.tf_runtime import tf  # pylint: disable=g-import-not-at-top
  if Path(f"{path}.index").is_file():
    return str(path)
  if path.is_dir():
    if (path / "variables" / "variables.index").is_file():
      return str(path / "variables" / "variables")
    latest = tf.train.latest_checkpoint(str(path))
    if latest:
      return latest
    indexes = sorted(path.glob("*.index"))
    if len(indexes) == 1:
      return str(indexes[0])[:-len(".index")]
    if len(indexes) > 1:
      raise InputError(f"several checkpoints here ({', '.join(p.name for p in indexes)}): "
                       "pass the prefix of one (e.g. DIR/model.ckpt-1000)", path=path)
  raise InputError("no TF checkpoint here (expected PREFIX.index + PREFIX.data-*, a folder "
                   "with a `checkpoint` file, or a TF-Hub module with variables/)", path=path)


def read_checkpoint(prefix: str) -> dict[str, np.ndarray]:
  """Every model variable of the checkpoint (optimizer state skipped)."""
  from realm_bench.tf_runtime import tf  # pylint: disable=g-import-not-at-top
  try:
    reader = tf.train.load_checkpoint(prefix)
    names = reader.get_variable_to_shape_map()
    return {name: np.asarray(reader.get_tensor(name)) for name in sorted(names)
            if not _SKIP.search(name)}
  except (tf.errors.OpError, ValueError) as e:
    raise InputError(f"could not be read as a TF checkpoint ({type(e).__name__}: "
                     f"{str(e).splitlines()[0][:300]})", path=prefix) from None


def _hf_name(rest: str) -> tuple[str, bool]:
  """A TF variable path below a tower (`encoder/layer_3/output/dense/kernel`) -> its Hugging
  Face name (`encoder.layer.3.output.dense.weight`) and whether it must be transposed."""
  parts = rest.split("/")
  leaf = parts[-1]
  transpose = leaf == "kernel"
  parts[-1] = {"kernel": "weight", "gamma": "weight", "beta": "bias",
               "output_bias": "bias"}.get(leaf, leaf)
  if leaf.endswith("_embeddings"):
    parts.append("weight")
  parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", p) for p in parts]
  return ".".join(parts), transpose


def _put(out: dict, name: str, array: np.ndarray, transpose: bool) -> None:
  out[name] = np.ascontiguousarray(array.T) if transpose else array


def _parent(scope: str) -> str | None:
  """`a/b/` -> `a/`, `a/` -> ``, `` -> None."""
  if not scope:
    return None
  return scope[:-1].rpartition("/")[0] + ("/" if "/" in scope[:-1] else "")


def to_hf_names(variables: dict[str, np.ndarray], *, where: str) -> tuple[dict, dict]:
  """({Hugging Face name: array}, {tower prefix: TF scope}) of a checkpoint's variables.

  Each BERT found becomes a tower named as a Hugging Face REALM class would hold it: its
  encoder under `<tower>realm.`, a retriever projection under `<tower>cls.dense` /
  `<tower>cls.LayerNorm`, a masked-LM head under `<tower>cls.predictions.`, a span MLP under
  `<tower>qa_outputs.`; towers are `tower0.`, `tower1.`, ... in the order of their scopes
  (`` when there is one). `block_emb` (REALM's / ORQA's `encoded.ckpt`) is kept as it is.
  """
  scopes = sorted(n[:-len(WORD_EMBEDDINGS)] for n in variables if n.endswith(WORD_EMBEDDINGS))
  if not scopes and BLOCK_EMB not in variables:
    raise InputError(f"no BERT in this checkpoint (no variable ending in {WORD_EMBEDDINGS!r}; "
                     f"it has e.g. {sorted(variables)[:5]})", path=where)
  out: dict[str, np.ndarray] = {}
  towers: dict[str, str] = {}
  used: set[str] = set()
  for i, scope in enumerate(scopes):
    tower = "" if len(scopes) == 1 else f"tower{i}."
    towers[tower] = scope
    for name, array in variables.items():
      for inner, hf_prefix in ((f"{scope}bert/", "realm."),
                               (f"{scope}cls/predictions/", "cls.predictions.")):
        if name.startswith(inner):
          hf, transpose = _hf_name(name[len(inner):])
          _put(out, tower + hf_prefix + hf, array, transpose)
          used.add(name)
    head = _parent(scope)
    if head is None:
      continue
    if f"{head}dense_1/kernel" in variables:   # the span MLP of a reader
      parts = {"dense": "qa_outputs.dense_intermediate", "dense_1": "qa_outputs.dense_output",
               "layer_normalization": "qa_outputs.layer_normalization"}
    else:                                       # a retriever's projection
      parts = {"dense": "cls.dense", "LayerNorm": "cls.LayerNorm",
               "layer_normalization": "cls.LayerNorm"}
    for tf_part, hf_part in parts.items():
      for leaf in ("kernel", "bias", "gamma", "beta"):
        name = f"{head}{tf_part}/{leaf}"
        if name in variables:
          hf, transpose = _hf_name(leaf)
          _put(out, f"{tower}{hf_part}.{hf}", variables[name], transpose)
          used.add(name)
  if BLOCK_EMB in variables:
    out[BLOCK_EMB] = variables[BLOCK_EMB]
    used.add(BLOCK_EMB)
  return out, towers
