"""One process of the multi-process checks (tests/test_multihost.py), run by `launch_local`
as 2 processes x 4 CPU devices, or alone with 8 devices as the reference.

  python tests/multihost_worker.py train RUN_DIR NUM_STEPS [STOP_AT] OUT.npz
  python tests/multihost_worker.py search|embed OUT.npz
  python tests/multihost_worker.py realm WORLD ROOT NAME:MODE:NUM_STEPS[:STOP_AT] ...

`train` trains the toy model on a data=4 x model=2 mesh (resuming from RUN_DIR's checkpoints)
and process 0 writes the final parameters, gathered from every process, to OUT.npz. `search`
splits a fixed corpus over the processes, searches it with `DistributedExactIndex` and writes
the merged top-k (process 0). `embed` also embeds the corpus, each process its own rows
(`sharded_index.build_sharded`), before searching it. `realm` runs tiny REALM pre-training
(see `_realm`).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from realm_bench import distributed  # pylint: disable=g-import-not-at-top

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


# The asynchronous runs' builder of process 1 is made this much slower per version (it is a
# spawned process that imports this module again as __mp_main__): the two hosts' shards of a
# version are then finished well apart, so a process that swapped to its own newest shard
# would search a version the other lacks.
SLOW_BUILDER_SECONDS = 1.0


def _slow_down_builder_of_process_1() -> None:
  import os  # pylint: disable=g-import-not-at-top
  import time  # pylint: disable=g-import-not-at-top
  if os.environ.get(distributed.ENV_PROCESS_ID) != "1":
    return
  from realm_bench.retrieval import async_refresh  # pylint: disable=g-import-not-at-top
  write_shard = async_refresh._write_shard  # pylint: disable=protected-access

  def slow_write_shard(*args, **kwargs):
    time.sleep(SLOW_BUILDER_SECONDS)
    return write_shard(*args, **kwargs)

  async_refresh._write_shard = slow_write_shard  # pylint: disable=protected-access


if __name__ == "__mp_main__":
  _slow_down_builder_of_process_1()


def _realm(world: str, root: str, runs: list[str]) -> None:
  """Tiny REALM pre-training runs (cold start, BATCH_SIZE 8 over the 8 devices), one after
  the other in this process; NAME:MODE:NUM_STEPS[:STOP_AT] trains ROOT/NAME ('sync' or 'async'
  refresh, every 2 steps), and a later run of the same NAME resumes it. Every process writes
  ROOT/NAME.pI.json: per step, the index version it searched and the candidates it retrieved
  for the global batch, and per invocation how many versions it built or swapped in."""
  import json  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top
  from realm_bench import gin_utils, train as train_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.pipelines import batching  # pylint: disable=g-import-not-at-top
  from realm_bench.retrieval import refresh  # pylint: disable=g-import-not-at-top
  before_step, select = refresh.IndexRefreshHook.before_step, batching.select_candidates
  seen: dict = {}

  def noting_before_step(self, step, params):
    out = before_step(self, step, params)
    seen["versions"][str(step)] = self.refresher.version_path.name
    seen["builds"][-1] = len(self.refresher.durations)   # built (sync) or swapped in (async)
    return out

  def noting_select(*args, **kwargs):   # REALM's prepare calls it once per step, after the hook
    cands = select(*args, **kwargs)
    seen["candidates"][max(seen["versions"], key=int)] = np.asarray(cands).tolist()
    return cands

  refresh.IndexRefreshHook.before_step = noting_before_step
  batching.select_candidates = noting_select
  world = Path(world)
  for run in runs:
    name, mode, num_steps, *stop = run.split(":")
    out = Path(root) / f"{name}.p{jax.process_index()}.json"
    seen.clear()
    seen.update(json.loads(out.read_text()) if out.exists() else
                {"versions": {}, "candidates": {}, "builds": [],
                 "processes": jax.process_count(), "devices": jax.device_count()})
    seen["builds"].append(0)
    gin_utils.parse_gin(["runs/pretrain.gin", "sizes/tiny.gin", "testing/tiny.gin"], [
        f"WORLD_DIR = '{world / 'world'}'", f"VOCAB_PATH = '{world / 'vocab.txt'}'",
        f"RUN_DIR = '{Path(root) / name}'", "WARM_START = None", f"NUM_STEPS = {num_steps}",
        "REFRESH_EVERY = 2", f"REFRESH_MODE = '{mode}'", "BATCH_SIZE = 8",
        "refresh.RefreshConfig.poll_seconds = 0.05", "train_lib.train.checkpoint_every = 2"])
    gin.get_configurable(train_lib.train)(progress=False, log_every=1,
                                          stop_at_step=int(stop[0]) if stop else None)
    out.write_text(json.dumps(seen))


def main(argv):
  # Here, not at import: the asynchronous builder is a spawned process, which imports this
  # module again (as __mp_main__) and must not join the run as a second process 1.
  distributed.initialize()   # before any JAX computation
  if argv[0] == "realm":
    _realm(argv[1], argv[2], argv[3:])
  elif argv[0] == "train":
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
