"""How much of a BERT stage's pooled [CLS], the retriever towers' input, varies between inputs.

  python results/experiments/pooled_spread.py OUT [OUT ...]

OUT is a quickstart folder (its `world/`, `vocab.txt` and `runs/bert`). Over 1,024 corpus
blocks it prints 1 - |mean|^2 / mean |x|^2 for the top layer's [CLS], the pooled output and
the body tokens, and for the same encoder at random init: the share of each that is not one
vector common to all inputs. Every ICT run starts from the pooled output (experiment log E66).
"""
import sys
from pathlib import Path

import gin
import jax
import numpy as np
from flax.core import meta

from realm_bench import checkpoints, gin_utils
from realm_bench import stages as stages_lib
from realm_bench.networks.bert import BertEncoder
from realm_bench.pipelines import base
from realm_bench.tasks.data import SequenceLengths


def spread(x) -> float:
  x = np.asarray(x, np.float64)
  mean = x.mean(0)
  return float(1 - (mean @ mean) / np.mean(np.sum(x * x, 1)))


def main(out: Path) -> None:
  config = stages_lib.QuickstartConfig()
  stages = stages_lib.Stages(out, config)
  gin_utils.parse_gin(["runs/ict.gin", config.size_gin],
                      [*stages.data_bindings(), "RUN_DIR = 'unused'",
                       f"BERT_RUN = '{out / 'runs' / 'bert'}'"])
  model = gin.query_parameter("train_lib.train.model").scoped_configurable_fn()
  corpus = base.load_corpus("realm_bench.synthetic.corpus", gin.get_configurable(SequenceLengths)())
  ids = corpus.doc_inputs[:1024]
  encoder = BertEncoder(model.retriever_config)
  trained = checkpoints.load_params(out / "runs" / "bert" / "checkpoints")["reader"]
  fresh = meta.unbox(encoder.init(jax.random.PRNGKey(0), ids[:2]))["params"]
  cells = []
  for params in (trained, fresh):
    hidden, pooled = encoder.apply({"params": params}, ids)
    tokens = np.asarray(hidden)[:, 1:].reshape(-1, hidden.shape[-1])[:4096]
    cells += [spread(hidden[:, 0]), spread(pooled), spread(tokens)]
  print(f"| {out} | " + " | ".join(f"{c:.3f}" for c in cells) + " |", flush=True)
  gin.clear_config()


if __name__ == "__main__":
  if len(sys.argv) < 2:
    sys.exit(__doc__)
  print("| BERT stage | [CLS] | pooled | body tokens | at init: [CLS] | pooled | body tokens |")
  print("|---|---:|---:|---:|---:|---:|---:|")
  for arg in sys.argv[1:]:
    main(Path(arg))
