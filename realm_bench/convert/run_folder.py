"""Writing a converted run folder, all of it or nothing.

The folder looks like a finished training run to everything that reads runs:
  checkpoints/0/   an orbax checkpoint of step 0 (state with the parameters and no optimizer
                   state, extra, param_shapes, files.json), what warm starts load;
  config.gin       gin bindings of the sizes the weights need (pass it after sizes/*.gin to
                   build a model they fit), and a comment saying where they came from;
  record.json      kind "train", experiment "convert", 0 steps, with the source and format
                   (so `train.finished` holds and the warm-started run's lineage names it);
  vocab.txt        the vocabulary the weights were trained with (VOCAB_PATH for later runs);
  index/           only when the source had block embeddings (REALM's / ORQA's encoded.ckpt,
                   HF RealmForOpenQA's block_emb): an exact index, `INDEX_FROM` reads it.
Everything is written into a temporary folder beside the target and renamed onto it at the
end, so an interrupted conversion leaves no folder that looks like a run.
"""
from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_json, atomic_write_text
from realm_bench.reporting.records import RunRecord, git_commit, hardware_info, write_record
from realm_bench.retrieval.index import embeddings_checksum


def _now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _save_checkpoint(folder: Path, params: dict, extra: dict) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import optax  # pylint: disable=g-import-not-at-top
  from realm_bench import checkpoints  # pylint: disable=g-import-not-at-top
  from realm_bench.train_state import TrainState  # pylint: disable=g-import-not-at-top
  state = TrainState(step=jnp.zeros((), jnp.int32), params=jax.tree.map(jnp.asarray, params),
                     opt_state={}, tx=optax.identity())
  manager = checkpoints.CheckpointManager(folder, keep=1, async_save=False)
  try:
    manager.save(0, state, extra)
  finally:
    manager.close()


def _save_index(folder: Path, block_emb: np.ndarray, source: dict) -> dict:
  """An exact index of the block embeddings, ids 0..N-1 (REALM's and ORQA's block records
  are numbered by their position in the blocks file)."""
  if block_emb.ndim != 2:
    raise InputError(f"block embeddings must be a matrix, got shape {block_emb.shape}",
                     field="block_emb")
  folder.mkdir(parents=True)
  np.save(folder / "embeddings.npy", np.ascontiguousarray(block_emb, np.float32))
  np.save(folder / "ids.npy", np.arange(block_emb.shape[0], dtype=np.int64))
  manifest = {"kind": "exact", "num_blocks": int(block_emb.shape[0]),
              "dim": int(block_emb.shape[1]), "checksum": embeddings_checksum(block_emb),
              "embedder_step": 0, "source": source}
  atomic_write_json(folder / "manifest.json", manifest)
  return manifest


def write_run_folder(*, out: Path, params: dict, config_gin: str, vocab: Path,
                     block_emb: np.ndarray | None, source: dict[str, Any],
                     stats: dict[str, Any], scale: str = "paper") -> RunRecord:
  """Writes `out` (which must not exist yet) and returns its record."""
  if out.exists():
    raise InputError("already exists: convert into a new folder (remove this one to redo it)",
                     path=out)
  out.parent.mkdir(parents=True, exist_ok=True)
  started = _now()
  tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.converting-", dir=out.parent))
  try:
    manifests = []
    if params:
      _save_checkpoint(tmp / "checkpoints", params, {"converted_from": source})
    if block_emb is not None:
      manifests.append(_save_index(tmp / "index", block_emb, source))
    shutil.copyfile(vocab, tmp / "vocab.txt")
    atomic_write_text(tmp / "config.gin", config_gin)
    record = RunRecord(
        run_id=out.name, kind="train", experiment="convert", task=f"convert:{source['format']}",
        dataset=None, split="train", scale=scale, metrics={}, num_examples=0,
        gin_config=config_gin, git_commit=git_commit(), hardware=hardware_info(),
        start_time=started, end_time=_now(), steps=0,
        index_manifests=[{k: v for k, v in m.items() if k != "source"} for m in manifests],
        params=source, stats=stats)
    write_record(tmp, record)
    os.replace(tmp, out)
  finally:
    if tmp.exists():
      shutil.rmtree(tmp, ignore_errors=True)
  return record
