"""`realm-bench convert` from TF checkpoints (no torch needed): every variable lands where an
independent reading of the layout says, the run folder is what warm starts read, a converted
run warm-starts a fine-tuning, and bad inputs are refused naming the file and field. The
outputs against Hugging Face's forward passes are in tests/parity/test_convert_*.py."""
from __future__ import annotations


import numpy as np
import pytest

from realm_bench import checkpoints, cli, train as train_lib
from realm_bench.reporting.records import read_record
from realm_bench.retrieval.index import load_index
from tests import tf_checkpoints as tfc

V, H, L, HEADS, M, P, S = 40, 16, 2, 2, 32, 8, 8


def expected_bert(tf_vars, scope, heads):
  """Our BertEncoder tree, read off the TF names independently of the converter."""
  b = f"{scope}bert/"
  d = H // heads

  def norm(name):
    return {"norm": {"scale": tf_vars[f"{name}/gamma"], "bias": tf_vars[f"{name}/beta"]}}

  def dense(name):
    return {"kernel": tf_vars[f"{name}/kernel"], "bias": tf_vars[f"{name}/bias"]}

  out = {"token_embed": {"embedding": tf_vars[f"{b}embeddings/word_embeddings"]},
         "position_embed": tf_vars[f"{b}embeddings/position_embeddings"],
         "type_embed": tf_vars[f"{b}embeddings/token_type_embeddings"],
         "embed_norm": norm(f"{b}embeddings/LayerNorm"), "pooler": dense(f"{b}pooler/dense")}
  for i in range(L):
    a = f"{b}encoder/layer_{i}/attention/"
    attention = {p: {"kernel": tf_vars[f"{a}self/{p}/kernel"].reshape(H, heads, d),
                     "bias": tf_vars[f"{a}self/{p}/bias"].reshape(heads, d)}
                 for p in ("query", "key", "value")}
    attention["out"] = {"kernel": tf_vars[f"{a}output/dense/kernel"].reshape(heads, d, H),
                        "bias": tf_vars[f"{a}output/dense/bias"]}
    out[f"layer_{i}"] = {
        "attention": attention, "attention_norm": norm(f"{a}output/LayerNorm"),
        "mlp_in": dense(f"{b}encoder/layer_{i}/intermediate/dense"),
        "mlp_out": dense(f"{b}encoder/layer_{i}/output/dense"),
        "mlp_norm": norm(f"{b}encoder/layer_{i}/output/LayerNorm")}
  return out


def assert_same_tree(got, want, where=""):
  if isinstance(want, dict):
    assert isinstance(got, dict) and sorted(got) == sorted(want), (where, sorted(got))
    for key in want:
      assert_same_tree(got[key], want[key], f"{where}/{key}")
  else:
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=where)


def run(*args):
  return cli.main(["convert", *map(str, args)])


@pytest.fixture(scope="module")
def google_bert(tmp_path_factory):
  """Google's BERT release layout: bert_model.ckpt.*, bert_config.json, vocab.txt."""
  folder = tmp_path_factory.mktemp("uncased_L-2_H-16")
  tf_vars = tfc.bert_variables(np.random.default_rng(0), vocab=V, hidden=H, layers=L, mlp=M,
                               mlm=True)
  tf_vars["global_step"] = np.array(7, np.int64)
  tf_vars["bert/embeddings/word_embeddings/adam_m"] = np.zeros((V, H), np.float32)
  tfc.write_checkpoint(folder / "bert_model.ckpt", tf_vars)
  tfc.write_bert_config(folder / "bert_config.json", vocab=V, hidden=H, layers=L, heads=HEADS,
                        mlp=M)
  tfc.write_vocab(folder / "vocab.txt", V)
  return folder, tf_vars


def test_google_bert_checkpoint_lands_weight_by_weight(google_bert, tmp_path):
  folder, tf_vars = google_bert
  assert run("--from", folder / "bert_model.ckpt", "--format", "tf-bert",
             "--out", tmp_path / "bert") == 0
  params = checkpoints.load_params(tmp_path / "bert" / "checkpoints")
  c = "cls/predictions/"
  assert_same_tree(params, {
      "reader": expected_bert(tf_vars, "", HEADS),
      "mlm_head": {"transform": {"kernel": tf_vars[f"{c}transform/dense/kernel"],
                                 "bias": tf_vars[f"{c}transform/dense/bias"]},
                   "transform_norm": {"norm": {"scale": tf_vars[f"{c}transform/LayerNorm/gamma"],
                                               "bias": tf_vars[f"{c}transform/LayerNorm/beta"]}},
                   "output_bias": tf_vars[f"{c}output_bias"]}})
  record = read_record(tmp_path / "bert" / "record.json")
  assert train_lib.finished(tmp_path / "bert") and record.experiment == "convert"
  assert record.params == {"format": "tf-bert", "source": [str((folder / "bert_model.ckpt")
                                                               .resolve())]}
  gin_text = (tmp_path / "bert" / "config.gin").read_text()
  assert "reader/bert.BertConfig.num_heads = 2" in gin_text
  assert "reader/bert.BertConfig.gelu_approximate = True" in gin_text   # TF BERT's "gelu"
  # The folder alone is also accepted (the one checkpoint in it).
  assert run("--from", folder, "--format", "tf-bert", "--out", tmp_path / "again") == 0


def realm_exports(root, rng, *, norm="LayerNorm", vocab=V, hidden=H, layers=L, mlp=M,
                  proj=P, span=S, blocks=None):
  """A REALM/ORQA-style embedder (hub module variables, the projection one scope above the
  BERT) with encoded/encoded.ckpt, and a fine-tuned reader checkpoint."""
  embedder = {**tfc.bert_variables(rng, "module/module/module/", vocab=vocab, hidden=hidden,
                                   layers=layers, mlp=mlp),
              **tfc.projection_variables(rng, "module/module/", hidden=hidden, proj=proj,
                                         norm=norm)}
  tfc.write_checkpoint(root / "embedder" / "variables" / "variables", embedder)
  tfc.write_vocab(root / "embedder" / "assets" / "vocab.txt", vocab)
  if blocks is not None:
    tfc.write_checkpoint(root / "embedder" / "encoded" / "encoded.ckpt",
                         {"block_emb": rng.normal(size=(blocks, proj)).astype(np.float32)})
  reader = {**tfc.bert_variables(rng, "reader/module/", vocab=vocab, hidden=hidden,
                                 layers=layers, mlp=mlp),
            **span_or_none(rng, hidden, span)}
  tfc.write_checkpoint(root / "reader" / "model.ckpt-100", reader)
  tfc.write_vocab(root / "reader" / "vocab.txt", vocab)
  return embedder, reader


def span_or_none(rng, hidden, span):
  return tfc.span_variables(rng, "reader/", hidden=hidden, span=span)


def test_orqa_embedder_reader_and_block_embeddings(tmp_path):
  embedder, reader = realm_exports(tmp_path, np.random.default_rng(1),
                                   norm="layer_normalization", blocks=5)
  assert run("--from", tmp_path / "embedder", "--from", tmp_path / "reader", "--format",
             "tf-orqa", "--bert_config", _config(tmp_path), "--out", tmp_path / "run") == 0
  params = checkpoints.load_params(tmp_path / "run" / "checkpoints")
  assert sorted(params) == ["reader", "retriever", "span_head"]
  tower = params["retriever"]["embedder"]
  assert_same_tree(tower["bert"], expected_bert(embedder, "module/module/module/", HEADS))
  np.testing.assert_array_equal(tower["projection"]["kernel"], embedder["module/module/dense/kernel"])
  np.testing.assert_array_equal(tower["projection_norm"]["norm"]["scale"],
                                embedder["module/module/layer_normalization/gamma"])
  assert_same_tree(params["reader"], expected_bert(reader, "reader/module/", HEADS))
  both = reader["reader/dense/kernel"]
  np.testing.assert_array_equal(params["span_head"]["start"]["kernel"], both[:, :S])
  np.testing.assert_array_equal(params["span_head"]["end"]["kernel"], both[:, S:])
  np.testing.assert_array_equal(params["span_head"]["score"]["kernel"],
                                reader["reader/dense_1/kernel"])
  np.testing.assert_array_equal(params["span_head"]["hidden_norm"]["norm"]["bias"],
                                reader["reader/layer_normalization/beta"])
  index = load_index(tmp_path / "run" / "index")
  assert index.num_blocks == 5 and list(index.ids) == [0, 1, 2, 3, 4]
  gin_text = (tmp_path / "run" / "config.gin").read_text()
  assert "PROJECTION_NORM_EPS = 0.001" in gin_text and "SPAN_HIDDEN = 8" in gin_text


def _config(root):
  path = root / "bert_config.json"
  tfc.write_bert_config(path, vocab=V, hidden=H, layers=L, heads=HEADS, mlp=M)
  return path


def test_without_a_bert_config_the_heads_are_assumed_and_recorded(tmp_path, capsys):
  realm_exports(tmp_path, np.random.default_rng(2), hidden=128, mlp=64, layers=1)
  assert run("--from", tmp_path / "embedder", "--format", "tf-realm",
             "--out", tmp_path / "run") == 0
  record = read_record(tmp_path / "run" / "record.json")
  assert record.stats["assumed"][0].startswith("num_attention_heads = 2")
  assert "PROJECTION_NORM_EPS = None" in (tmp_path / "run" / "config.gin").read_text()


def test_bad_inputs_are_named_and_nothing_is_left_behind(google_bert, tmp_path, capsys):
  folder, _ = google_bert
  out = tmp_path / "run"

  def error(*args):
    assert run(*args, "--out", out) == 2
    assert not out.exists() and not list(tmp_path.glob(".run*"))
    return capsys.readouterr().err

  assert "does not exist" in error("--from", tmp_path / "nope", "--format", "tf-bert")
  bad = tmp_path / "bad" / "bert_config.json"
  bad.parent.mkdir()
  tfc.write_bert_config(bad, vocab=V, hidden=H, layers=3, heads=HEADS, mlp=M)
  err = error("--from", folder / "bert_model.ckpt", "--format", "tf-bert", "--bert_config", bad)
  assert f"{bad}: field 'num_hidden_layers': 3 here, but the weights" in err
  short = tfc.write_vocab(tmp_path / "vocab.txt", V - 1)
  err = error("--from", folder, "--format", "tf-bert", "--vocab", short)
  assert f"{short}: {V - 1} wordpieces, but the weights' word embeddings have {V} rows" in err
  assert "use --format tf-realm" in error("--from", _reader_only(tmp_path), "--format",
                                          "tf-bert", "--bert_config", folder / "bert_config.json")
  (tmp_path / "junk.ckpt.index").write_text("junk")
  assert "could not be read as a TF checkpoint" in error(
      "--from", tmp_path / "junk.ckpt", "--format", "tf-realm")
  out.mkdir()
  assert run("--from", folder, "--format", "tf-bert", "--out", out) == 2
  assert "already exists" in capsys.readouterr().err


def _reader_only(root):
  rng = np.random.default_rng(3)
  tfc.write_checkpoint(root / "r" / "model.ckpt", {
      **tfc.bert_variables(rng, "reader/module/", vocab=V, hidden=H, layers=L, mlp=M),
      **tfc.span_variables(rng, "reader/", hidden=H, span=S)})
  return root / "r" / "model.ckpt"


def test_a_converted_run_warm_starts_a_fine_tuning(world, tmp_path):
  """Sized as sizes/tiny.gin + testing/tiny.gin, on the world's vocabulary."""
  from tests.test_realm_pipeline import _train  # pylint: disable=g-import-not-at-top
  vocab = (world / "vocab.txt").read_text().splitlines()
  rng = np.random.default_rng(4)
  embedder, reader = realm_exports(tmp_path, rng, vocab=len(vocab), hidden=32, layers=1,
                                   mlp=64, proj=16, span=16)
  del embedder, reader
  config = tmp_path / "bert_config.json"
  tfc.write_bert_config(config, vocab=len(vocab), hidden=32, layers=1, heads=2, mlp=64,
                        max_len=64)
  for sub in ("embedder/assets", "reader"):
    (tmp_path / sub / "vocab.txt").write_text("\n".join(vocab) + "\n")
  converted = world / "converted_orqa"
  assert run("--from", tmp_path / "embedder", "--from", tmp_path / "reader", "--format",
             "tf-orqa", "--bert_config", config, "--out", converted) == 0
  # max_len 64 here, 128 in sizes/tiny.gin: the warm start names the differing parameter.
  with pytest.raises(Exception, match="position_embed"):
    _train(world, "runs/finetune.gin", "ft_converted", NUM_STEPS=1, WARM_START=str(converted))
  assert not (world / "ft_converted").exists()
  record = _train(world, "runs/finetune.gin", "ft_converted", NUM_STEPS=1,
                  WARM_START=str(converted), extra_files=[str(converted / "config.gin")])
  assert record.lineage == "converted_orqa"
  params = checkpoints.load_params(world / "ft_converted" / "checkpoints")
  start = checkpoints.load_params(converted / "checkpoints")
  assert params["reader"]["position_embed"].shape == start["reader"]["position_embed"].shape
