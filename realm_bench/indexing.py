"""`index`: the keyword-only entry function behind `realm-bench index --gin_file=...`.

Embeds a corpus with the document tower of a checkpoint and builds a MIPS index from it, the
job a paper-scale run needs once before fine-tuning or evaluation (13,353,718 blocks: the
embedding alone is hours of accelerator time, so it streams to resumable shards; see
`retrieval/corpus_embedding.py`). The output folder holds `embeddings/` (the shards, removed
once the index is saved), `index/` (the index with its manifest) and `config.gin`. Rerunning
the command resumes the embedding, or does nothing when the index is already there.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import jax

from realm_bench import checkpoints, gin_utils, validate
from realm_bench.retrieval import corpus_embedding
from realm_bench.retrieval.embed import build_index
from realm_bench.retrieval.index import ExactIndex, MipsIndex
from realm_bench.tasks.data import SequenceLengths


def index(*, model, checkpoint_from: str, corpus_task: str, out_dir: str,
          sequence_lengths: SequenceLengths,
          index_factory: Callable[[], MipsIndex] = ExactIndex, step: int | None = None,
          batch_size: int = 256, shard_rows: int = 1 << 16, progress: bool = True) -> dict:
  """Builds `out_dir/index` from the retriever of `checkpoint_from` (a run folder); returns
  the index manifest."""
  validate.text("index", "checkpoint_from",
                None if checkpoint_from is None else str(checkpoint_from))
  validate.text("index", "corpus_task", corpus_task)
  validate.text("index", "out_dir", None if out_dir is None else str(out_dir))
  validate.whole("index", "step", step, minimum=0, optional=True)
  validate.whole("index", "batch_size", batch_size, minimum=1)
  validate.whole("index", "shard_rows", shard_rows, minimum=1)
  out_dir = Path(out_dir)
  checkpoint_dir = Path(checkpoint_from) / "checkpoints"
  manager = checkpoints.CheckpointManager(checkpoint_dir, read_only=True)
  try:
    step = manager.latest_step() if step is None else step
    params = {"retriever": manager.load_params(step)["retriever"]}
  finally:
    manager.close()
  block_len = sequence_lengths.block
  fingerprint = {"checkpoint": str(checkpoint_dir), "step": step, "corpus_task": corpus_task,
                 "block_len": block_len}
  index_dir = out_dir / "index"
  if (index_dir / "manifest.json").exists():
    manifest = json.loads((index_dir / "manifest.json").read_text())
    if manifest.get("source") == fingerprint:
      print(f"index already built: {index_dir}")
      return manifest
  gin_utils.write_config(out_dir)
  embed = jax.jit(model.embed_docs)
  built = build_index(
      embed_fn=lambda ids: embed(params, ids), index_factory=index_factory,
      manifest={"embedder_step": step, "source": fingerprint},
      make_batches=lambda skip: corpus_embedding.corpus_batches(
          corpus_task, batch_size=batch_size, block_len=block_len, skip_rows=skip),
      work_dir=out_dir / "embeddings", fingerprint=fingerprint, batch_size=batch_size,
      shard_rows=shard_rows, total=_num_blocks(corpus_task), progress=progress,
      save=lambda index: index.save(index_dir))
  print(json.dumps({k: v for k, v in built.manifest.items() if k != "source"}))
  return dict(built.manifest)


def _num_blocks(corpus_task: str) -> int | None:
  """The corpus size for the progress bar, when the task's source knows it cheaply."""
  import seqio  # pylint: disable=g-import-not-at-top
  import realm_bench.tasks.registry  # pylint: disable=g-import-not-at-top,unused-import
  try:
    return int(seqio.get_mixture_or_task(corpus_task).num_input_examples("train"))
  except (TypeError, ValueError, NotImplementedError):
    return None
