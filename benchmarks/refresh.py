"""What keeping the index fresh costs: corpus embedding throughput, and the trainer's share.

1. Corpus embedding through the code a refresh runs (`corpus_embedding.embed_to_shards`:
   fixed-shape jitted document tower, shards written to disk), in blocks/s and as a fraction
   of a matmul peak measured in the same run (the tower's analytic FLOPs as in
   benchmarks/train_step.py; embedding gathers, softmax and LayerNorm are not counted).
2. A real REALM pre-training on a generated tiny world, once with the synchronous refresh (the
   baseline: the trainer stops to re-embed) and once with the asynchronous builder process:
   the share of the trainer's wall time spent refreshing (sync) or waiting for / exporting /
   swapping indexes (async). The first index is always waited for, so the async share is also
   shown without it; the target (under 1%) is about the steady state of a long run.

  python benchmarks/refresh.py [--shapes tiny,base] [--blocks tiny=4096,base=64]
      [--steps 60] [--refresh_every 10]
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gin  # pylint: disable=g-import-not-at-top
import jax
import numpy as np

import train_step  # benchmarks/train_step.py: shapes, analytic FLOPs, same-run peaks
from realm_bench import gin_utils
from realm_bench import train as train_lib
from realm_bench.retrieval import corpus_embedding

DEFAULT_BLOCKS = {"tiny": 4096, "base": 64}
DEFAULT_BATCH = {"tiny": 256, "base": 8}


def embedding_row(shape_name: str, blocks: int, batch: int, work: Path) -> dict:
  shape = train_step.load_shape(shape_name, "fp32", train_step.DEFAULT_VOCAB[shape_name])
  model = train_step.realm_model(shape)
  length = shape.block_len
  rng = np.random.default_rng(0)
  inputs = rng.integers(5, shape.config.vocab_size, size=(blocks, length), dtype=np.int32)
  params = jax.jit(model.init_params)(jax.random.PRNGKey(0), train_step.pretrain_batch(
      shape, 1, 2))
  embed = jax.jit(model.embed_docs)
  compile_clock = time.perf_counter()
  jax.block_until_ready(embed(params, inputs[:batch]))
  compile_s = time.perf_counter() - compile_clock

  def batches(skip):
    for start in range(skip, blocks, batch):
      yield np.arange(start, min(start + batch, blocks)), inputs[start:start + batch]

  clock = time.perf_counter()
  corpus_embedding.embed_to_shards(
      embed_fn=lambda x: embed(params, x), make_batches=batches, out_dir=work / shape_name,
      fingerprint={"shape": shape_name}, batch_size=batch, shard_rows=batch * 16)
  seconds = time.perf_counter() - clock
  flops = blocks * train_step.tower_flops(shape.config, length)
  return {"shape": shape_name, "blocks": blocks, "batch": batch, "length": length,
          "seconds": seconds, "compile_s": compile_s, "tflops": flops / seconds / 1e12}


def _world(root: Path) -> None:
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  gin_utils.parse_gin(["world/tiny.gin"], [])
  world_lib.generate(out_dir=root / "world", config=world_lib.WorldConfig())
  vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_world(root / "world"), size=1000,
                             out=root / "vocab.txt")


def training_row(root: Path, mode: str, steps: int, refresh_every: int) -> dict:
  gin_utils.parse_gin(["runs/pretrain.gin", "sizes/tiny.gin"], [
      f"WORLD_DIR = '{root / 'world'}'", f"VOCAB_PATH = '{root / 'vocab.txt'}'",
      f"RUN_DIR = '{root / mode}'", "WARM_START = None", f"NUM_STEPS = {steps}",
      "BATCH_SIZE = 8", "NUM_CANDIDATES = 4", f"REFRESH_EVERY = {refresh_every}",
      f"REFRESH_MODE = '{mode}'", "WARMUP_STEPS = 1"])
  clock = time.perf_counter()
  record = gin.get_configurable(train_lib.train)(progress=False, log_every=steps)
  wall = time.perf_counter() - clock
  pipe = record.stats
  if mode == "sync":
    spent = pipe["num_refreshes"] * pipe["refresh_seconds_mean"]
    first = spent / max(pipe["num_refreshes"], 1)   # the step-0 build (async waits for one too)
  else:
    spent, first = pipe["refresh_overhead_seconds"], pipe["refresh_wait_seconds"]
  return {"mode": mode, "steps": steps, "wall": wall, "refreshes": pipe["num_refreshes"],
          "spent": spent, "first": first, "staleness_mean": pipe["staleness_mean"],
          "staleness_max": pipe["staleness_max"]}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--shapes", default="tiny,base")
  p.add_argument("--blocks", default=None, help="per shape, e.g. tiny=4096,base=64")
  p.add_argument("--steps", type=int, default=60, help="pre-training steps per refresh mode")
  p.add_argument("--refresh_every", type=int, default=10)
  p.add_argument("--peak_size", type=int, default=2048)
  p.add_argument("--peak_reps", type=int, default=5)
  args = p.parse_args(argv)
  args.shapes = [s for s in args.shapes.split(",") if s]
  args.blocks = train_step._per_shape(args.blocks, DEFAULT_BLOCKS, "--blocks")  # pylint: disable=protected-access
  return args


def main(argv: Sequence[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parse_args(argv)
  command = f"python benchmarks/refresh.py {shlex.join(argv)}".rstrip()
  print(f"command: {command}", flush=True)
  load_start = os.getloadavg()[0]
  peak_start = train_step.matmul_tflops(args.peak_size, args.peak_reps)["fp32"]
  with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    embed_rows = [embedding_row(s, args.blocks[s], DEFAULT_BATCH[s], root / "embed")
                  for s in args.shapes]
    peak = max(peak_start, train_step.matmul_tflops(args.peak_size, args.peak_reps)["fp32"])
    _world(root)
    train_rows = [training_row(root, mode, args.steps, args.refresh_every)
                  for mode in ("sync", "async")]

  print()
  print(f"command: `{command}`")
  print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, jax "
        f"{jax.__version__}; load average (1 min) at start {load_start:.2f}, at end "
        f"{os.getloadavg()[0]:.2f}; fp32 peak ({args.peak_size}^2 matmul, best of start and "
        f"end) {peak:.3f} TFLOP/s")
  print()
  print("| document tower | blocks | batch | length | blocks/s | TFLOP/s | % fp32 peak "
        "| compile s |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|")
  for r in embed_rows:
    print(f"| {r['shape']} | {r['blocks']} | {r['batch']} | {r['length']} "
          f"| {r['blocks'] / r['seconds']:,.1f} | {r['tflops']:.3f} "
          f"| {100 * r['tflops'] / peak:.0f}% | {r['compile_s']:.1f} |")
  print()
  print("| refresh | steps | refreshes | trainer wall s | refresh time in trainer s | share "
        "| share after the first index | staleness mean / max |")
  print("|---|---:|---:|---:|---:|---:|---:|---|")
  for r in train_rows:
    print(f"| {r['mode']} | {r['steps']} | {r['refreshes']} | {r['wall']:.1f} "
          f"| {r['spent']:.2f} | {100 * r['spent'] / r['wall']:.2f}% "
          f"| {100 * (r['spent'] - r['first']) / (r['wall'] - r['first']):.2f}% "
          f"| {r['staleness_mean']:.1f} / {r['staleness_max']} |")
  sync, async_ = train_rows
  steady = (async_["spent"] - async_["first"]) / (async_["wall"] - async_["first"])
  print()
  print(f"async trainer time in refresh vs sync: {async_['spent'] / max(sync['spent'], 1e-9):.2f}x"
        f" (after the first index {(async_['spent'] - async_['first']) / max(sync['spent'] - sync['first'], 1e-9):.2f}x)")
  print(f"target: async share after the first index under 1%: "
        f"{'PASS' if steady < 0.01 else 'FAIL'} ({100 * steady:.2f}%)")
  print("refresh time in trainer: sync = the re-embedding and index builds; async = waiting "
        "for an index, exporting the document tower and swapping (the builder runs beside).")
  return 0


if __name__ == "__main__":
  sys.exit(main())
