"""The accelerator path in one run: what a GPU or TPU does with REALM's four heavy parts.

One prepared script for a machine with a GPU or TPU (JAX's default backend is measured, so
install jax[cuda12] or jax[tpu] first, see the README's "Scaling out"), which also runs end to
end on the CPU at small shapes (`--small`) so that it is tested where no accelerator is:

1. the REALM pre-training step (`Trainer.train_step`, BERT's AdamW) at base size in fp32 and
   bf16, as a fraction of the device's own matmul peak measured in the same run
   (benchmarks/train_step.py's analytic FLOPs and peak);
2. corpus embedding through the refresh's code (`corpus_embedding.embed_to_shards`), in
   blocks/s and the time that rate takes for the paper's 13,353,718 blocks;
3. exact MIPS over 13.35M x 128 float32 rows held on the device (6.8 GB), searched chunk by
   chunk with a running top-k (rows are generated on the device; `--small` searches fewer and
   extrapolates the time linearly);
4. a short REALM pre-training on a generated tiny world with the asynchronous index builder
   (benchmarks/refresh.py's row), for the share of trainer time the refresh costs.

It prints one table and writes every number to `--json`.

  python benchmarks/accelerator.py [--small] [--json accelerator.json] [--skip mips,refresh]
"""
from __future__ import annotations

import argparse
import json
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

import jax  # pylint: disable=g-import-not-at-top
import jax.numpy as jnp
import numpy as np

import refresh  # benchmarks/refresh.py: the embedding and async-refresh rows
import train_step  # benchmarks/train_step.py: shapes, analytic FLOPs, same-run peaks

PAPER_BLOCKS = 13_353_718
PROJ_DIM = train_step.PROJ_DIM
PARTS = ("step", "embed", "mips", "refresh")

# name -> (step shape, batch, steps, embedding shape, blocks, embed batch, MIPS rows,
#          MIPS chunk rows, queries, refresh steps, peak matmul size)
SETTINGS = {
    "full": dict(shape="base", batch=4, steps=5, embed_shape="base", blocks=4096,
                 embed_batch=256, mips_rows=PAPER_BLOCKS, mips_chunk=1 << 20, queries=128,
                 refresh_steps=40, refresh_every=10, peak_size=8192, peak_reps=10),
    "small": dict(shape="tiny", batch=2, steps=2, embed_shape="tiny", blocks=256,
                  embed_batch=64, mips_rows=50_000, mips_chunk=1 << 14, queries=16,
                  refresh_steps=4, refresh_every=2, peak_size=256, peak_reps=2),
}


def step_rows(setting: dict, precisions: Sequence[str]) -> list[dict]:
  """The pre-training step of `setting['shape']` in each precision."""
  rows = []
  for precision in precisions:
    shape = train_step.load_shape(setting["shape"], precision,
                                  train_step.DEFAULT_VOCAB[setting["shape"]])
    candidates = 8
    batch = train_step.pretrain_batch(shape, setting["batch"], candidates)
    seconds, compile_s, _, _ = train_step.bench_step(train_step.realm_model(shape), batch,
                                                     setting["steps"])
    flops = train_step.pretrain_flops(shape, setting["batch"], candidates)
    rows.append({"precision": precision, "shape": setting["shape"], "batch": setting["batch"],
                 "candidates": candidates, "step_s": seconds, "compile_s": compile_s,
                 "tflops": flops / seconds / 1e12})
  return rows


def _chunk_top_k(queries, rows, k):
  scores = queries @ rows.T
  return jax.lax.top_k(scores, k)


@jax.jit
def _merge(best_s, best_i, s, i):
  scores = jnp.concatenate([best_s, s], axis=1)
  ids = jnp.concatenate([best_i, i], axis=1)
  top, pos = jax.lax.top_k(scores, best_s.shape[1])
  return top, jnp.take_along_axis(ids, pos, axis=1)


def mips_row(*, rows: int, chunk: int, dim: int, queries: int, k: int = 10,
             reps: int = 3) -> dict:
  """Exact top-k of `queries` over `rows` x `dim` device-resident rows, chunk by chunk.

  The rows are generated on the device (a 13.35M-row host array would cost minutes to make
  and transfer and say nothing about search); the last chunk is padded with -inf-scoring rows
  so every chunk has one shape (one compilation). Checked against numpy on the first chunk.
  """
  device = jax.devices()[0]
  num_chunks = -(-rows // chunk)
  make = jax.jit(lambda key: jax.random.normal(key, (chunk, dim), jnp.float32))
  chunks = [make(jax.random.fold_in(jax.random.PRNGKey(0), c)) for c in range(num_chunks)]
  short = num_chunks * chunk - rows
  if short:   # rows past the corpus score -inf, as if absent
    chunks[-1] = chunks[-1].at[chunk - short:].set(-jnp.inf)
  jax.block_until_ready(chunks)
  q = jax.random.normal(jax.random.PRNGKey(1), (queries, dim), jnp.float32)
  top = jax.jit(_chunk_top_k, static_argnames="k")

  def search():
    best_s = jnp.full((queries, k), -jnp.inf, jnp.float32)
    best_i = jnp.zeros((queries, k), jnp.int32)
    for c, part in enumerate(chunks):
      s, i = top(q, part, k=k)
      best_s, best_i = _merge(best_s, best_i, jnp.nan_to_num(s, nan=-jnp.inf), i + c * chunk)
    return best_s, best_i

  times = train_step.time_calls(search, reps, warmup=1)
  seconds = min(times)
  first_s, first_i = top(q, chunks[0], k=k)
  want = np.sort(np.asarray(q) @ np.asarray(chunks[0])[:min(chunk, rows)].T, axis=1)[:, ::-1][:, :k]
  np.testing.assert_allclose(np.asarray(first_s), want, rtol=1e-3, atol=1e-3)
  del first_i
  return {"rows": rows, "dim": dim, "chunk_rows": chunk, "queries": queries, "k": k,
          "device": str(device), "seconds": seconds, "queries_per_s": queries / seconds,
          "paper_scale_seconds": seconds * PAPER_BLOCKS / rows,
          "gb_on_device": rows * dim * 4 / 1e9}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--small", action="store_true",
                 help="tiny shapes and a 50k-row MIPS: the whole script in a few minutes on a "
                      "CPU (a check that it runs, not a measurement)")
  p.add_argument("--precisions", default="fp32,bf16", help="of the pre-training step")
  p.add_argument("--skip", default="", help=f"comma list of parts to skip: {', '.join(PARTS)}")
  p.add_argument("--json", default="accelerator.json", help="where to write the numbers")
  args = p.parse_args(argv)
  args.skip = [s for s in args.skip.split(",") if s]
  unknown = sorted(set(args.skip) - set(PARTS))
  if unknown:
    p.error(f"--skip: unknown parts {unknown} (known: {', '.join(PARTS)})")
  args.precisions = [s for s in args.precisions.split(",") if s]
  bad = sorted(set(args.precisions) - set(train_step.PRECISIONS))
  if bad:
    p.error(f"--precisions: unknown {bad} (known: {', '.join(train_step.PRECISIONS)})")
  return args


def _table(result: dict) -> list[str]:
  peaks = result["peak_tflops"]
  lines = ["| part | setting | measured | % of same-run peak | at paper scale |",
           "|---|---|---:|---:|---:|"]
  for r in result.get("step", []):
    peak = peaks["bf16" if r["precision"].startswith("bf16") else "fp32"]
    lines.append(f"| pre-training step, {r['precision']} | {r['shape']}, batch {r['batch']}, "
                 f"K={r['candidates']} | {r['step_s']:.3f} s/step, {r['tflops']:.2f} TFLOP/s "
                 f"| {100 * r['tflops'] / peak:.0f}% | |")
  e = result.get("embed")
  if e:
    per_s = e["blocks"] / e["seconds"]
    lines.append(f"| corpus embedding | {e['shape']}, {e['blocks']} blocks of {e['length']}, "
                 f"batch {e['batch']} | {per_s:,.0f} blocks/s | "
                 f"{100 * e['tflops'] / peaks['fp32']:.0f}% | "
                 f"{PAPER_BLOCKS / per_s / 3600:.2f} h for 13.35M |")
  m = result.get("mips")
  if m:
    lines.append(f"| exact MIPS | {m['rows']:,} x {m['dim']} on device ({m['gb_on_device']:.2f}"
                 f" GB), {m['queries']} queries, k={m['k']} | {m['queries_per_s']:,.1f} "
                 f"queries/s | | {m['paper_scale_seconds']:.3f} s a batch over 13.35M |")
  r = result.get("refresh")
  if r:
    share = 100 * r["spent"] / r["wall"]
    lines.append(f"| async refresh | tiny world, {r['steps']} steps, refreshes: {r['refreshes']}"
                 f"| {share:.2f}% of trainer time, staleness {r['staleness_mean']:.1f} / "
                 f"{r['staleness_max']} | | |")
  return lines


def run(args: argparse.Namespace) -> dict:
  setting = SETTINGS["small" if args.small else "full"]
  backend = jax.default_backend()
  result = {"command": f"python benchmarks/accelerator.py {shlex.join(sys.argv[1:])}".rstrip(),
            "backend": backend, "devices": [str(d) for d in jax.devices()],
            "device_kind": jax.devices()[0].device_kind, "jax": jax.__version__,
            "machine": platform.processor() or platform.machine(), "small": args.small,
            "setting": setting}
  start_peaks = train_step.matmul_tflops(setting["peak_size"], setting["peak_reps"])
  if "step" not in args.skip:
    result["step"] = step_rows(setting, args.precisions)
  with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp)
    if "embed" not in args.skip:
      result["embed"] = refresh.embedding_row(setting["embed_shape"], setting["blocks"],
                                              setting["embed_batch"], root / "embed")
    if "mips" not in args.skip:
      result["mips"] = mips_row(rows=setting["mips_rows"], chunk=setting["mips_chunk"],
                                dim=PROJ_DIM, queries=setting["queries"])
    end_peaks = train_step.matmul_tflops(setting["peak_size"], setting["peak_reps"])
    result["peak_tflops"] = {k: max(start_peaks[k], end_peaks[k]) for k in start_peaks}
    if "refresh" not in args.skip:
      clock = time.perf_counter()
      refresh._world(root)   # pylint: disable=protected-access
      result["world_seconds"] = time.perf_counter() - clock
      result["refresh"] = refresh.training_row(root, "async", setting["refresh_steps"],
                                               setting["refresh_every"])
  return result


def main(argv: Sequence[str] | None = None) -> int:
  args = parse_args(sys.argv[1:] if argv is None else list(argv))
  if jax.default_backend() == "cpu" and not args.small:
    print("note: JAX's backend is the CPU; install jax[cuda12] or jax[tpu] to measure an "
          "accelerator (README, 'Scaling out'). Running the full shapes anyway.",
          file=sys.stderr)
  result = run(args)
  print()
  print(f"command: `{result['command']}`")
  print(f"backend: {result['backend']} ({result['device_kind']}, {len(result['devices'])} "
        f"devices), jax {result['jax']}; same-run matmul peak "
        + ", ".join(f"{k} {v:.3f}" for k, v in result["peak_tflops"].items()) + " TFLOP/s")
  print()
  print("\n".join(_table(result)))
  Path(args.json).parent.mkdir(parents=True, exist_ok=True)
  Path(args.json).write_text(json.dumps(result, indent=1, default=str) + "\n")
  print(f"\nwrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
