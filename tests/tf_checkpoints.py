"""Small random checkpoints under the variable names of Google's TF BERT, REALM and ORQA, for
the `convert` tests (the layouts `realm_bench/convert/tf_files.py` documents)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from realm_bench.tf_runtime import tf

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_checkpoint(prefix: Path, variables: dict[str, np.ndarray]) -> None:
  """A TF1 checkpoint (tf.compat.v1 variables and Saver) holding exactly `variables`."""
  prefix.parent.mkdir(parents=True, exist_ok=True)
  with tf.Graph().as_default():
    v1 = tf.compat.v1
    tf_vars = [v1.Variable(value, name=name) for name, value in variables.items()]
    saver = v1.train.Saver(tf_vars)
    with v1.Session() as sess:
      sess.run(v1.global_variables_initializer())
      saver.save(sess, str(prefix), write_meta_graph=False)


def bert_variables(rng, scope="", *, vocab, hidden, layers, mlp, max_len=64, types=2,
                   mlm=False) -> dict[str, np.ndarray]:
  """BERT's variables as Google's modeling.py names them, under `scope`."""
  def w(*shape):
    return rng.normal(0.0, 0.2, shape).astype(np.float32)

  def norm(name):
    return {f"{name}/gamma": 1.0 + w(hidden) * 0.5, f"{name}/beta": w(hidden)}

  b = f"{scope}bert/"
  out = {f"{b}embeddings/word_embeddings": w(vocab, hidden),
         f"{b}embeddings/position_embeddings": w(max_len, hidden),
         f"{b}embeddings/token_type_embeddings": w(types, hidden),
         **norm(f"{b}embeddings/LayerNorm")}
  for i in range(layers):
    layer = f"{b}encoder/layer_{i}/"
    for part in ("query", "key", "value"):
      out[f"{layer}attention/self/{part}/kernel"] = w(hidden, hidden)
      out[f"{layer}attention/self/{part}/bias"] = w(hidden)
    out.update({f"{layer}attention/output/dense/kernel": w(hidden, hidden),
                f"{layer}attention/output/dense/bias": w(hidden),
                **norm(f"{layer}attention/output/LayerNorm"),
                f"{layer}intermediate/dense/kernel": w(hidden, mlp),
                f"{layer}intermediate/dense/bias": w(mlp),
                f"{layer}output/dense/kernel": w(mlp, hidden),
                f"{layer}output/dense/bias": w(hidden), **norm(f"{layer}output/LayerNorm")})
  out[f"{b}pooler/dense/kernel"] = w(hidden, hidden)
  out[f"{b}pooler/dense/bias"] = w(hidden)
  if mlm:
    c = f"{scope}cls/predictions/"
    out.update({f"{c}transform/dense/kernel": w(hidden, hidden),
                f"{c}transform/dense/bias": w(hidden), **norm(f"{c}transform/LayerNorm"),
                f"{c}output_bias": w(vocab)})
  return out


def projection_variables(rng, scope, *, hidden, proj, norm="LayerNorm"):
  return {f"{scope}dense/kernel": rng.normal(0, 0.2, (hidden, proj)).astype(np.float32),
          f"{scope}dense/bias": rng.normal(0, 0.2, proj).astype(np.float32),
          f"{scope}{norm}/gamma": (1 + rng.normal(0, 0.1, proj)).astype(np.float32),
          f"{scope}{norm}/beta": rng.normal(0, 0.2, proj).astype(np.float32)}


def span_variables(rng, scope, *, hidden, span):
  return {f"{scope}dense/kernel": rng.normal(0, 0.2, (hidden, 2 * span)).astype(np.float32),
          f"{scope}dense/bias": rng.normal(0, 0.2, 2 * span).astype(np.float32),
          f"{scope}layer_normalization/gamma": (1 + rng.normal(0, 0.1, span)).astype(np.float32),
          f"{scope}layer_normalization/beta": rng.normal(0, 0.2, span).astype(np.float32),
          f"{scope}dense_1/kernel": rng.normal(0, 0.2, (span, 1)).astype(np.float32),
          f"{scope}dense_1/bias": rng.normal(0, 0.2, 1).astype(np.float32)}


def write_vocab(path: Path, size: int) -> Path:
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text("\n".join(SPECIALS + [f"w{i}" for i in range(size - 5)]) + "\n")
  return path


def write_bert_config(path: Path, *, vocab, hidden, layers, heads, mlp, max_len=64):
  path.write_text(json.dumps({"vocab_size": vocab, "hidden_size": hidden,
                              "num_hidden_layers": layers, "num_attention_heads": heads,
                              "intermediate_size": mlp, "max_position_embeddings": max_len,
                              "type_vocab_size": 2, "hidden_act": "gelu"}))
