"""Memory of the REALM pre-training step with and without activation checkpointing (remat),
with the layers unrolled or scanned (`BertConfig.scan_layers`).

XLA's own analysis of the compiled step, with nothing allocated: arguments (the train state
and the batch) + outputs + temporaries - the donated state it writes in place. That is what a
step needs at its peak beyond the Python process itself, and it can be read for BERT-base on a
machine that could not run the step. The baseline is the same shape without remat and with
unrolled layers, compiled in the same run.

  python benchmarks/step_memory.py [--shape base] [--batches 1,4] [--candidates 8] [--scan]
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_step as bench  # pylint: disable=g-import-not-at-top,wrong-import-position

from realm_bench import host_memory, optim  # pylint: disable=wrong-import-position
from realm_bench.trainer import Trainer  # pylint: disable=wrong-import-position

GIB = 1 << 30


def analyse(shape_name: str, batch: int, candidates: int, remat: bool,
            scan: bool = False) -> dict:
  shape = bench.load_shape(shape_name, "fp32", bench.DEFAULT_VOCAB[shape_name])
  config = bench.dataclasses.replace(shape.config, remat=remat, scan_layers=scan)
  shape = bench.Shape(shape.name, config, shape.query_len, shape.block_len)
  trainer = Trainer(bench.realm_model(shape), optim.make_optimizer(
      learning_rate=1e-4, warmup_steps=10, total_steps=1000))
  data = bench.pretrain_batch(shape, batch, candidates)
  state = trainer.abstract_state(jax.random.PRNGKey(0), data)
  compiled = trainer.lower_step(state, data).compile()
  m = compiled.memory_analysis()
  need, flops = host_memory.step_requirements(compiled)
  return {"arguments": m.argument_size_in_bytes / GIB, "temporaries": m.temp_size_in_bytes / GIB,
          "total": need / GIB, "tflop": flops / 1e12}


def main(argv=None) -> int:
  argv = sys.argv[1:] if argv is None else list(argv)
  p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
  p.add_argument("--shape", default="base", choices=bench.SHAPES)
  p.add_argument("--batches", default="1,4")
  p.add_argument("--candidates", type=int, default=8)
  p.add_argument("--scan", action="store_true",
                 help="also the scanned layer stack, with and without remat (default: off)")
  args = p.parse_args(argv)
  settings = [(False, False), (True, False)] + ([(False, True), (True, True)] if args.scan else [])
  print(f"command: `{shlex.join(['python', 'benchmarks/step_memory.py', *argv])}`")
  print("\n| shape | batch | K | remat | layers | state + batch GiB | temporaries GiB "
        "| step total GiB | vs baseline | XLA TFLOP/step |")
  print("|---|---:|---:|---|---|---:|---:|---:|---:|---:|")
  for batch in (int(b) for b in args.batches.split(",")):
    base = None
    for remat, scan in settings:
      r = analyse(args.shape, batch, args.candidates, remat, scan)
      base = base or r
      print(f"| {args.shape} | {batch} | {args.candidates} | {'on' if remat else 'off'} "
            f"| {'scanned' if scan else 'unrolled'} "
            f"| {r['arguments']:.2f} | {r['temporaries']:.2f} | {r['total']:.2f} "
            f"| {r['total'] / base['total']:.2f}x | {r['tflop']:.2f} |", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
