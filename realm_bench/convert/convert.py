"""`convert`: the keyword-only entry function behind `realm-bench convert`.

Reads one or more checkpoints of one format, checks their weights against their configs and
vocabulary, and writes one run folder (`run_folder.py`) holding every tower found. Several
`--from` make one run of several exports: REALM's embedder with its knowledge-augmented
encoder is a pre-training start (`WARM_START` and `BERT_RUN` may then name the same folder),
an ORQA fine-tuned retriever with its reader a fine-tuning or evaluation start.

The formats differ in what their configs say and default to:
  hf-bert   `BertModel` / `BertForMaskedLM` / `BertForPreTraining` folders (model_type "bert");
  hf-realm  `RealmEmbedder`, `RealmScorer`, `RealmKnowledgeAugEncoder`, `RealmReader`,
            `RealmForOpenQA` folders (model_type "realm": retriever_proj_size,
            span_hidden_size, max_span_width, reader_layer_norm_eps are read);
  tf-bert   Google's BERT release: `bert_model.ckpt` + `bert_config.json`;
  tf-realm  REALM's TF-Hub exports (embedder, bert, reader) and `encoded/encoded.ckpt`;
  tf-orqa   ORQA's, the same layout, but the ICT projection's LayerNorm epsilon is Keras'
            1e-3 (PROJECTION_NORM_EPS), where REALM's is BERT's 1e-12.
Hugging Face's `hidden_act = "gelu"` is the exact erf form and `gelu_new` the tanh one; in a
TF BERT `bert_config.json`, "gelu" is the tanh form (Google's `modeling.py` computes it so).
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Sequence

from realm_bench.convert import hf_files, tf_files, towers
from realm_bench.convert.run_folder import write_run_folder
from realm_bench.errors import InputError
from realm_bench.reporting.records import RunRecord

FORMATS = ("hf-bert", "hf-realm", "tf-bert", "tf-realm", "tf-orqa")
_HF_ACT = {"gelu": False, "gelu_new": True, "gelu_pytorch_tanh": True}
_TF_ACT = {"gelu": True}
# config.json field -> BertSizes field
_SIZE_FIELDS = {"vocab_size": "vocab_size", "hidden_size": "hidden_size",
                "num_hidden_layers": "num_layers", "intermediate_size": "mlp_dim",
                "max_position_embeddings": "max_len", "type_vocab_size": "type_vocab_size"}
MAX_SPAN_LEN = 10   # ORQA's max_span_width, when no config says


@dataclasses.dataclass
class _Source:
  """One checkpoint read: its towers, the config fields that shape them, its vocabulary."""
  path: Path
  converted: towers.Converted
  config: dict[str, Any]
  config_path: Path | None
  vocab: Path | None
  files: list[str]
  assumed: list[str]


def _check_sizes(source: _Source, *, fmt: str) -> None:
  """Refuses a config that disagrees with its weights, naming the file and the field."""
  conv, config, where = source.converted, source.config, source.config_path
  for sizes in (conv.retriever, conv.reader):
    if sizes is None:
      continue
    for field, attr in _SIZE_FIELDS.items():
      if field in config and config[field] != getattr(sizes, attr):
        raise InputError(f"{config[field]!r} here, but the weights in {source.path} have "
                         f"{getattr(sizes, attr)}", path=where, field=field)
  for field, value in (("retriever_proj_size", conv.proj_dim),
                       ("span_hidden_size", conv.span_hidden)):
    if fmt == "hf-realm" and value is not None and field in config and config[field] != value:
      raise InputError(f"{config[field]!r} here, but the weights in {source.path} have {value}",
                       path=where, field=field)


def _vocab_of(folder: Path) -> Path | None:
  for candidate in (folder / "vocab.txt", folder / "assets" / "vocab.txt"):
    if candidate.is_file():
      return candidate
  return None


def _read_hf(path: Path, fmt: str) -> _Source:
  if not path.is_dir():
    raise InputError("expected a Hugging Face save_pretrained folder", path=path)
  config = hf_files.read_config(path)
  want = "bert" if fmt == "hf-bert" else "realm"
  if config.get("model_type") != want:
    raise InputError(f"model_type is {config.get('model_type')!r}, --format {fmt} reads "
                     f"{want!r} models", path=path / hf_files.CONFIG, field="model_type")
  act = config.get("hidden_act", "gelu")
  if act not in _HF_ACT:
    raise InputError(f"activation {act!r} is not BERT's (known: {', '.join(_HF_ACT)})",
                     path=path / hf_files.CONFIG, field="hidden_act")
  heads = _whole(config, "num_attention_heads", path / hf_files.CONFIG)
  state, files = hf_files.read_weights(path)
  converted = towers.convert_towers(state, heads=heads, where=str(path))
  return _Source(path, converted, config, path / hf_files.CONFIG, _vocab_of(path),
                 [str(f) for f in files], [])


def _whole(config: dict, field: str, where) -> int:
  value = config.get(field)
  if not isinstance(value, int) or isinstance(value, bool) or value < 1:
    raise InputError(f"expected a positive whole number, got {value!r}", path=where,
                     field=field)
  return value


def _read_tf(path: Path, fmt: str, bert_config: Path | None) -> _Source:
  prefix = tf_files.checkpoint_prefix(path)
  folder = path if path.is_dir() else path.parent
  variables = tf_files.read_checkpoint(prefix)
  encoded = folder / "encoded" / "encoded.ckpt"
  files = [prefix]
  if tf_files.BLOCK_EMB not in variables and Path(f"{encoded}.index").is_file():
    blocks = tf_files.read_checkpoint(str(encoded))
    if tf_files.BLOCK_EMB not in blocks:
      raise InputError(f"no variable {tf_files.BLOCK_EMB!r} (REALM's and ORQA's block "
                       f"embeddings; it has {sorted(blocks)[:5]})", path=encoded)
    variables[tf_files.BLOCK_EMB] = blocks[tf_files.BLOCK_EMB]
    files.append(str(encoded))
  state, _ = tf_files.to_hf_names(variables, where=prefix)
  config_path = bert_config
  if config_path is None:
    for candidate in (folder / "bert_config.json", folder.parent / "bert_config.json"):
      if candidate.is_file():
        config_path = candidate
        break
  assumed: list[str] = []
  config: dict[str, Any] = {}
  if config_path is not None:
    if not config_path.is_file():
      raise InputError("file does not exist", path=config_path)
    config = hf_files.read_json_object(config_path)
    act = config.get("hidden_act", "gelu")
    if act not in _TF_ACT:
      raise InputError(f"activation {act!r} is not BERT's (\"gelu\", the tanh form in TF "
                       "BERT)", path=config_path, field="hidden_act")
    heads = _whole(config, "num_attention_heads", config_path)
  elif fmt == "tf-bert":
    raise InputError("no bert_config.json beside the checkpoint: pass --bert_config FILE",
                     path=folder)
  else:
    hidden = next((v.shape[1] for k, v in state.items() if k.endswith(towers.WORD)), 64)
    heads = max(1, hidden // 64)
    assumed.append(f"num_attention_heads = {heads} (hidden size / 64, as in every released "
                   "BERT; no bert_config.json found, pass --bert_config to set it)")
  converted = towers.convert_towers(state, heads=heads, where=prefix)
  if config_path is not None:
    config = {**config, "num_attention_heads": heads}
  else:
    config = {"num_attention_heads": heads}
  return _Source(path, converted, config, config_path, _vocab_of(folder), files, assumed)


def _merge(sources: list[_Source]) -> towers.Converted:
  merged = towers.Converted(params={})
  for source in sources:
    conv = source.converted
    for key, subtree in conv.params.items():
      if key in merged.params:
        raise InputError(f"two sources hold a {key!r} (the second is this one): convert them "
                         "into separate run folders", path=source.path)
      merged.params[key] = subtree
    for field in ("retriever", "reader", "proj_dim", "span_hidden", "block_emb"):
      value = getattr(conv, field)
      if value is not None:
        if getattr(merged, field) is not None:
          raise InputError(f"two sources hold a {field}", path=source.path)
        setattr(merged, field, value)
    if "retriever" in conv.params:
      merged.share_embedders = conv.share_embedders
    merged.initialised += conv.initialised
  return merged


def _vocabulary(sources: list[_Source], vocab: Path | None, merged: towers.Converted) -> Path:
  if vocab is None:
    found = [s.vocab for s in sources if s.vocab is not None]
    if not found:
      raise InputError("no vocab.txt beside the checkpoint (nor in assets/): pass --vocab FILE "
                       "(the vocabulary the model was trained with)", path=sources[0].path)
    digests = {hashlib.sha256(p.read_bytes()).hexdigest(): p for p in found}
    if len(digests) > 1:
      a, b = list(digests.values())[:2]
      raise InputError(f"the sources' vocabularies differ ({a} and {b}): pass --vocab FILE",
                       path=b)
    vocab = found[0]
  if not vocab.is_file():
    raise InputError("vocabulary file does not exist", path=vocab)
  lines = vocab.read_text(encoding="utf-8").splitlines()
  for sizes in (merged.retriever, merged.reader):
    if sizes is not None and sizes.vocab_size != len(lines):
      raise InputError(f"{len(lines)} wordpieces, but the weights' word embeddings have "
                       f"{sizes.vocab_size} rows", path=vocab)
  if not lines or lines[0] != "[PAD]":
    raise InputError("line 1 must be [PAD] (seqio reserves id 0 for padding; BERT's "
                     "vocab.txt starts so)", path=vocab, line=1)
  return vocab


def _gin_value(value) -> str:
  return repr(value) if not isinstance(value, bool) else str(value)


def config_text(*, merged: towers.Converted, sources: list[_Source], fmt: str) -> str:
  """gin bindings that build a model these weights fit (after sizes/*.gin)."""
  config = sources[0].config
  for source in sources:
    if "reader" in source.converted.params:
      config = source.config
  act = (_HF_ACT if fmt.startswith("hf") else _TF_ACT).get(config.get("hidden_act", "gelu"))
  lines = [f"# Converted by `realm-bench convert --format {fmt}` from:"]
  lines += [f"#   {s.path}" for s in sources]
  lines += ["# The sizes these weights need: pass this file after sizes/*.gin (e.g.",
            "# --gin_file=sizes/base.gin --gin_file=RUN/config.gin) and VOCAB_PATH = RUN/vocab.txt.",
            "from __gin__ import dynamic_registration",
            "from realm_bench.networks import bert", ""]
  for scope, sizes in (("retriever", merged.retriever), ("reader", merged.reader)):
    if sizes is None:
      continue
    src = next(s for s in sources if (s.converted.retriever if scope == "retriever"
                                      else s.converted.reader) is sizes)
    heads = src.config["num_attention_heads"]
    eps = src.config.get("layer_norm_eps", 1e-12)
    fields = {"hidden_size": sizes.hidden_size, "num_layers": sizes.num_layers,
              "num_heads": heads, "mlp_dim": sizes.mlp_dim, "max_len": sizes.max_len,
              "type_vocab_size": sizes.type_vocab_size, "gelu_approximate": act,
              "layer_norm_eps": eps}
    lines += [f"{scope}/bert.BertConfig.{k} = {_gin_value(v)}" for k, v in fields.items()]
  if merged.retriever is not None:
    lines += [f"PROJ_DIM = {merged.proj_dim}",
              f"SHARE_EMBEDDERS = {merged.share_embedders}",
              f"PROJECTION_NORM_EPS = {1e-3 if fmt == 'tf-orqa' else None}"]
  if merged.span_hidden is not None:
    reader_cfg = next(s.config for s in sources if s.converted.span_hidden is not None)
    lines += [f"SPAN_HIDDEN = {merged.span_hidden}",
              f"MAX_SPAN_LEN = {reader_cfg.get('max_span_width', MAX_SPAN_LEN)}"]
  return "\n".join(lines) + "\n"


def convert(*, sources: Sequence[str], fmt: str, out: str, vocab: str | None = None,
            bert_config: str | None = None, scale: str = "paper") -> RunRecord:
  """Converts `sources` (checkpoints of format `fmt`) into the run folder `out`."""
  if fmt not in FORMATS:
    raise InputError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})", field="format")
  if not sources:
    raise InputError("give at least one --from PATH", field="from")
  read = []
  for name in sources:
    path = Path(name)
    if not path.exists() and not Path(f"{path}.index").exists():
      raise InputError("does not exist", path=path)
    source = _read_hf(path, fmt) if fmt.startswith("hf") else _read_tf(
        path, fmt, Path(bert_config) if bert_config else None)
    _check_sizes(source, fmt=fmt)
    if fmt in ("hf-bert", "tf-bert") and {"retriever", "span_head"} & set(
        source.converted.params):
      raise InputError(f"this is not a BERT checkpoint (it has a "
                       f"{sorted({'retriever', 'span_head'} & set(source.converted.params))[0]}"
                       f"): use --format {fmt[:3]}realm", path=path)
    read.append(source)
  merged = _merge(read)
  vocab_path = _vocabulary(read, Path(vocab) if vocab else None, merged)
  text = config_text(merged=merged, sources=read, fmt=fmt)
  source = {"format": fmt, "source": [str(s.path) for s in read]}   # as given: no machine paths
  stats = {"files": [f for s in read for f in s.files], "subtrees": sorted(merged.params),
           "initialised": merged.initialised, "assumed": [a for s in read for a in s.assumed]}
  record = write_run_folder(out=Path(out), params=merged.params, config_gin=text,
                            vocab=vocab_path, block_emb=merged.block_emb, source=source,
                            stats=stats, scale=scale)
  return record
