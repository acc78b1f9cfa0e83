"""The retriever's ceiling at a REALM budget: REALM pre-training's run, with the retriever
trained on the source block itself (cross-entropy over the K candidates wherever the block a
sentence came from is among them) instead of through the reader's posterior.

  python results/experiments/source_supervised.py OUT NAME [gin bindings...]

OUT is a quickstart output folder (its runs/bert and runs/ict are the warm starts); writes
OUT/runs/NAME and OUT/runs/NAME_recall_dev (zero-shot Recall@5 on the NQ twin's dev split).
"""
import sys
from pathlib import Path

import jax.numpy as jnp

from realm_bench import models, objectives


def source_block_cross_entropy(scores, batch):
  """-log p(source block | x) over the candidates, averaged over the examples that have it."""
  log_pz = objectives.masked_log_softmax(scores, batch["cand_valid"] > 0)
  is_source = batch["cand_is_source"] > 0
  present = jnp.any(is_source, axis=-1)
  picked = jnp.sum(jnp.where(is_source, log_pz, 0.0), axis=-1)
  return -jnp.sum(jnp.where(present, picked, 0.0)) / jnp.maximum(jnp.sum(present), 1.0)


def source_cross_entropy(self, params, batch, dropout_rng):
  _, metrics = ORIGINAL(self, params, batch, dropout_rng)
  scores, _ = self._forward(params, batch, dropout_rng)
  loss = source_block_cross_entropy(scores, batch)
  return loss, dict(metrics, source_cross_entropy=loss)


ORIGINAL = models.RealmPretrainModel.loss_fn

if __name__ == "__main__":
  from realm_variant import run  # pylint: disable=g-import-not-at-top  (this folder)
  out, name, extra = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
  sys.argv = sys.argv[:1]
  models.RealmPretrainModel.loss_fn = source_cross_entropy
  run(out, name, extra)
