"""`realm-bench convert` from Hugging Face folders: the converted run against HF's forward.

Small random models of every class the command reads are saved with `save_pretrained`
(safetensors, and pytorch_model.bin for one), converted into a run folder, read back as a warm
start reads it (`checkpoints.load_params`), and run through our networks on the inputs HF
gets: embeddings, MLM logits, encoder outputs and span logits must agree to 1e-5 relative.
The TF formats are checked the same way from checkpoints written under TF's variable names
(`test_convert_tf.py` here, with HF as the reference; tests/test_convert.py without torch).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
hf = pytest.importorskip("transformers.models.deprecated.realm")

import jax.numpy as jnp  # pylint: disable=g-import-not-at-top,wrong-import-position

from realm_bench import checkpoints, cli  # pylint: disable=g-import-not-at-top
from realm_bench.models import MlmNet  # pylint: disable=g-import-not-at-top
from realm_bench.networks.bert import BertConfig, BertEncoder  # pylint: disable=g-import-not-at-top
from realm_bench.networks.embedder import Embedder, document_segment_ids  # pylint: disable=g-import-not-at-top
from realm_bench.networks.reader import SpanHead  # pylint: disable=g-import-not-at-top
from realm_bench.reporting.records import read_record  # pylint: disable=g-import-not-at-top

pytestmark = pytest.mark.parity

TARGET = 1e-5
VOCAB, HIDDEN, LAYERS, HEADS, MLP, PROJ, SPAN_HIDDEN, MAX_SPAN, MAX_LEN = 64, 32, 2, 4, 64, 16, 16, 4, 40
SEP = 3


def vocab_lines():
  return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(VOCAB - 5)]


def randomised(module, seed):
  """Every parameter random (LayerNorm gains near 1), tied ones drawn once; eval mode."""
  gen = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, param in module.named_parameters():
      noise = torch.randn(param.shape, generator=gen)
      norm = "LayerNorm.weight" in name or "layer_normalization.weight" in name
      param.copy_(1.0 + 0.1 * noise if norm else 0.5 * noise if "embeddings" in name
                  else 0.2 * noise)
  return module.eval()


def realm_config(**overrides):
  fields = dict(vocab_size=VOCAB, hidden_size=HIDDEN, retriever_proj_size=PROJ,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=MLP,
                max_position_embeddings=MAX_LEN, span_hidden_size=SPAN_HIDDEN,
                max_span_width=MAX_SPAN, hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, hidden_act="gelu_new")
  fields.update(overrides)
  return hf.RealmConfig(**fields)


def bert_config(**overrides):
  fields = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                num_attention_heads=HEADS, intermediate_size=MLP, max_position_embeddings=MAX_LEN,
                hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  fields.update(overrides)
  return transformers.BertConfig(**fields)


def ours(approximate=True):
  return BertConfig(vocab_size=VOCAB, hidden_size=HIDDEN, num_layers=LAYERS, num_heads=HEADS,
                    mlp_dim=MLP, max_len=MAX_LEN, dropout_rate=0.0,
                    gelu_approximate=approximate)


def save(model, folder, **kwargs):
  model.save_pretrained(folder, **kwargs)
  (folder / "vocab.txt").write_text("\n".join(vocab_lines()) + "\n")
  return folder


def inputs(seed=0, length=12):
  """Two `[CLS] title [SEP] body [SEP]` rows, the second padded."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((2, length), np.int32)
  for row, n in enumerate((length, length - 3)):
    ids[row, :n] = rng.integers(5, VOCAB, n)
    ids[row, 0], ids[row, 3], ids[row, n - 1] = 2, SEP, SEP
  return ids


def rel(a, b):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def check(errors, name, got, want):
  errors[name] = max(errors.get(name, 0.0), rel(got, want))
  assert rel(got, want) <= TARGET, (name, rel(got, want))


def t(x):
  return torch.from_numpy(np.array(x)).long()


def convert(tmp_path, fmt, *folders, name="run"):
  out = tmp_path / name
  assert cli.main(["convert", *[a for f in folders for a in ("--from", str(f))],
                   "--format", fmt, "--out", str(out)]) == 0
  return out, checkpoints.load_params(out / "checkpoints")


@pytest.mark.parametrize("safe", [True, False])
def test_bert_for_masked_lm(tmp_path, safe, parity_errors):
  model = randomised(transformers.BertForMaskedLM(bert_config()), 1)
  out, params = convert(tmp_path, "hf-bert", save(model, tmp_path / "bert",
                                                  safe_serialization=safe))
  assert sorted(params) == ["mlm_head", "reader"]
  record = read_record(out / "record.json")
  assert record.experiment == "convert" and record.kind == "train" and record.steps == 0
  assert record.params["format"] == "hf-bert"
  assert record.stats["initialised"] == ["bert.pooler.dense"]   # BertForMaskedLM has none
  assert (out / "vocab.txt").read_text().splitlines() == vocab_lines()
  assert "reader/bert.BertConfig.gelu_approximate = False" in (out / "config.gin").read_text()
  ids = inputs()
  positions = np.array([[1, 5, 7], [2, 4, 6]], np.int32)
  logits = MlmNet(ours(approximate=False)).apply({"params": params}, jnp.asarray(ids),
                                                 jnp.asarray(positions))
  with torch.no_grad():
    theirs = model(input_ids=t(ids), attention_mask=t(ids > 0)).logits.numpy()
  check(parity_errors, "convert hf-bert: MLM logits", logits,
        np.take_along_axis(theirs, positions[..., None], axis=1))


def test_bert_model_pooled_output(tmp_path, parity_errors):
  model = randomised(transformers.BertModel(bert_config(hidden_act="gelu_new")), 2)
  _, params = convert(tmp_path, "hf-bert", save(model, tmp_path / "bert"))
  ids = inputs(1)
  types = np.asarray(document_segment_ids(jnp.asarray(ids), SEP))
  seq, pooled = BertEncoder(ours()).apply({"params": params["reader"]}, jnp.asarray(ids),
                                          jnp.asarray(types))
  with torch.no_grad():
    theirs = model(input_ids=t(ids), attention_mask=t(ids > 0), token_type_ids=t(types))
  mask = ids > 0
  check(parity_errors, "convert hf-bert: encoder output", np.asarray(seq)[mask],
        theirs.last_hidden_state.numpy()[mask])
  check(parity_errors, "convert hf-bert: pooled output", pooled, theirs.pooler_output.numpy())


def test_realm_embedder(tmp_path, parity_errors):
  model = randomised(hf.RealmEmbedder(realm_config()), 3)
  out, params = convert(tmp_path, "hf-realm", save(model, tmp_path / "embedder"))
  assert sorted(params) == ["retriever"] and sorted(params["retriever"]) == ["embedder"]
  assert "PROJ_DIM = 16" in (out / "config.gin").read_text()
  ids = inputs(2)
  types = np.asarray(document_segment_ids(jnp.asarray(ids), SEP))
  emb = Embedder(ours(), PROJ).apply({"params": params["retriever"]["embedder"]},
                                     jnp.asarray(ids), jnp.asarray(types))
  with torch.no_grad():
    theirs = model(input_ids=t(ids), attention_mask=t(ids > 0),
                   token_type_ids=t(types)).projected_score.numpy()
  check(parity_errors, "convert hf-realm: document embedding", emb, theirs)


def test_realm_encoder_and_reader_in_one_run(tmp_path, parity_errors):
  encoder = randomised(hf.RealmKnowledgeAugEncoder(realm_config()), 4)
  embedder = randomised(hf.RealmEmbedder(realm_config()), 5)
  out, params = convert(tmp_path, "hf-realm", save(embedder, tmp_path / "embedder"),
                        save(encoder, tmp_path / "encoder"))
  assert sorted(params) == ["mlm_head", "reader", "retriever"]
  ids = inputs(3)
  types = np.asarray(document_segment_ids(jnp.asarray(ids), SEP))
  positions = np.array([[4, 5], [6, 1]], np.int32)
  logits = MlmNet(ours()).apply({"params": params}, jnp.asarray(ids), jnp.asarray(positions),
                                jnp.asarray(types))
  with torch.no_grad():
    hidden = encoder.realm(input_ids=t(ids), attention_mask=t(ids > 0),
                           token_type_ids=t(types)).last_hidden_state
    theirs = encoder.cls(hidden).numpy()
  check(parity_errors, "convert hf-realm: MLM logits", logits,
        np.take_along_axis(theirs, positions[..., None], axis=1))

  reader = randomised(hf.RealmReader(realm_config()), 6)
  _, params = convert(tmp_path, "hf-realm", save(reader, tmp_path / "reader", safe_serialization=False),
                      name="reader_run")
  assert sorted(params) == ["reader", "span_head"]
  seq, _ = BertEncoder(ours()).apply({"params": params["reader"]}, jnp.asarray(ids[:1]),
                                     jnp.asarray(types[:1]))
  spans = SpanHead(ours(), SPAN_HIDDEN, MAX_SPAN).apply({"params": params["span_head"]}, seq)
  with torch.no_grad():
    hidden = reader.realm(input_ids=t(ids[:1]), token_type_ids=t(types[:1])).last_hidden_state
    span_only, starts, ends = reader.qa_outputs(hidden, torch.ones_like(t(ids[:1])).bool())
  starts, ends = starts.numpy(), ends.numpy()
  check(parity_errors, "convert hf-realm: span logits",
        np.asarray(spans)[0][starts, ends - starts], span_only.numpy()[0])


def test_realm_scorer_with_two_towers_and_open_qa_block_embeddings(tmp_path):
  config = realm_config()
  query = randomised(hf.RealmEmbedder(config), 7)
  scorer = randomised(hf.RealmScorer(config, query_embedder=query), 8)
  out, params = convert(tmp_path, "hf-realm", save(scorer, tmp_path / "scorer"))
  assert sorted(params["retriever"]) == ["doc_embedder", "query_embedder"]
  assert "SHARE_EMBEDDERS = False" in (out / "config.gin").read_text()

  openqa = hf.RealmForOpenQA(realm_config(num_block_records=7))
  randomised(openqa, 9)
  with torch.no_grad():
    openqa.block_emb.copy_(torch.randn(7, PROJ))
  out, params = convert(tmp_path, "hf-realm", save(openqa, tmp_path / "openqa", safe_serialization=False),
                        name="openqa_run")
  assert sorted(params) == ["reader", "retriever", "span_head"]
  manifest = json.loads((out / "index" / "manifest.json").read_text())
  assert manifest["num_blocks"] == 7 and manifest["dim"] == PROJ
  from realm_bench.retrieval.index import load_index  # pylint: disable=g-import-not-at-top
  np.testing.assert_array_equal(load_index(out / "index").embeddings, openqa.block_emb.numpy())


def test_config_that_disagrees_with_the_weights_is_refused(tmp_path, capsys):
  folder = save(randomised(hf.RealmEmbedder(realm_config()), 10), tmp_path / "embedder")
  config = json.loads((folder / "config.json").read_text())
  (folder / "config.json").write_text(json.dumps({**config, "hidden_size": 48}))
  assert cli.main(["convert", "--from", str(folder), "--format", "hf-realm",
                   "--out", str(tmp_path / "run")]) == 2
  err = capsys.readouterr().err
  assert "config.json: field 'hidden_size': 48 here, but the weights" in err
  assert not (tmp_path / "run").exists() and not list(tmp_path.glob(".run*"))
  assert cli.main(["convert", "--from", str(folder), "--format", "hf-bert",
                   "--out", str(tmp_path / "run")]) == 2
  assert "field 'model_type'" in capsys.readouterr().err
