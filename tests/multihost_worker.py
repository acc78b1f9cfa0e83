"""One process of the multi-process checks (tests/test_multihost.py), run by `launch_local`
as 2 processes x 4 CPU devices, or alone with 8 devices as the reference.

  python tests/multihost_worker.py train RUN_DIR NUM_STEPS [STOP_AT] OUT.npz
  python tests/multihost_worker.py search|embed OUT.npz

`train` trains the toy model on a data=4 x model=2 mesh (resuming from RUN_DIR's checkpoints)
and process 0 writes the final parameters, gathered from every process, to OUT.npz. `search`
splits a fixed corpus over the processes, searches it with `DistributedExactIndex` and writes
the merged top-k (process 0). `embed` also embeds the corpus, each process its own rows
(`sharded_index.build_sharded`), before searching it.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realm_bench import distributed  # pylint: disable=g-import-not-at-top

distributed.initialize()   # before any JAX computation

import jax  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top

NUM_PARTITIONS = 2
CORPUS_ROWS, DIM, QUERIES, K = 5003, 16, 7, 10


def _train(run_dir: str, num_steps: int, stop_at: int | None, out: str) -> None:
  import toy_model  # pylint: disable=g-import-not-at-top
  steps = stop_at if stop_at is not None else num_steps
  result = toy_model.run_training(run_dir, num_steps=steps, checkpoint_every=2,
                                  num_partitions=NUM_PARTITIONS)
  params = multihost_utils.process_allgather(result.state.params, tiled=True)
  if distributed.is_primary():
    flat = {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]}
    np.savez(out, **flat, __step__=np.int64(result.step),
             __devices__=np.int64(jax.device_count()),
             __processes__=np.int64(jax.process_count()))


def corpus() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  rng = np.random.default_rng(3)
  rows = rng.normal(size=(CORPUS_ROWS, DIM)).astype(np.float32)
  ids = np.arange(CORPUS_ROWS, dtype=np.int64) * 7 + 11
  queries = rng.normal(size=(QUERIES, DIM)).astype(np.float32)
  return rows, ids, queries


def _search(out: str) -> None:
  from realm_bench.retrieval import sharded_index  # pylint: disable=g-import-not-at-top
  rows, ids, queries = corpus()
  shard = distributed.DataShard.of_this_process()
  start, stop = distributed.row_range(CORPUS_ROWS, shard)
  index = sharded_index.DistributedExactIndex(top_k_block=64)
  index.build(rows[start:stop], ids[start:stop])
  scores, found = index.search(queries, K)
  if distributed.is_primary():
    np.savez(out, scores=scores, ids=found, processes=np.int64(jax.process_count()))


def tokens() -> np.ndarray:
  return np.random.default_rng(4).integers(0, 50, size=(CORPUS_ROWS, 6)).astype(np.int32)


def embed_tokens(ids):
  """A fixed document tower: a seeded embedding table, averaged over the block."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  table = jax.random.normal(jax.random.PRNGKey(0), (50, DIM))
  return jnp.tanh(table[ids].mean(axis=1) * 3.0)


def _embed(out: str) -> None:
  from realm_bench.retrieval import sharded_index  # pylint: disable=g-import-not-at-top
  _, ids, queries = corpus()
  index = sharded_index.build_sharded(embed_fn=jax.jit(embed_tokens), doc_inputs=tokens(),
                                      ids=ids, batch_size=128,
                                      index_factory=lambda: sharded_index.ExactIndex(
                                          top_k_block=64))
  scores, found = index.search(queries, K)
  if distributed.is_primary():
    np.savez(out, scores=scores, ids=found, processes=np.int64(jax.process_count()),
             global_rows=np.int64(index.manifest["global_num_blocks"]))


def main(argv):
  if argv[0] == "train":
    run_dir, num_steps = argv[1], int(argv[2])
    stop_at = int(argv[3]) if len(argv) == 5 else None
    _train(run_dir, num_steps, stop_at, argv[-1])
  elif argv[0] == "search":
    _search(argv[1])
  elif argv[0] == "embed":
    _embed(argv[1])
  else:
    raise SystemExit(f"unknown mode {argv[0]!r}")


if __name__ == "__main__":
  main(sys.argv[1:])
