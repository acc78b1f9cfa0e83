"""Two stages at once, one core each, against one stage on both cores.

The quickstart's networks are small (2 layers x 128): a fine-tuning step reaches about 7% of
the fp32 matmul peak (`train_step.py`), and XLA's CPU runtime splits such steps over two
threads poorly. If two single-threaded stages side by side finish more work per second than
one stage on both cores, `reproduce` can run its independent stages (the fine-tunings of one
pre-trained run, the evaluations) in two lanes.

  python benchmarks/stage_lanes.py OUT [--steps 300]

OUT is a quickstart's or a reproduction's folder (its world, vocabulary, BERT and ICT runs).
Every run is the same ORQA fine-tuning (`realm-bench train` with the quickstart's bindings,
`stages.finetune_bindings`), a fresh run folder each, under the Makefile's malloc settings:
first alone with XLA's default threads, then two at once, each pinned to its own core with
one XLA thread. The single-threaded pair must end on the same metrics as each other
(deterministic); whether they equal the two-thread run's is printed, not required (another
thread count may sum in another order).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from realm_bench import stages

sys.path.insert(0, str(Path(__file__).resolve().parent))
import malloc  # pylint: disable=g-import-not-at-top,wrong-import-position

ONE_THREAD = ("--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")


def _command(out: Path, runs: Path, run_dir: Path, steps: int) -> list[str]:
  cli = Path(sys.executable).with_name("realm-bench")
  config = stages.QuickstartConfig(finetune_steps=steps)
  bindings = [f"WORLD_DIR = '{out / 'world'}'", f"VOCAB_PATH = '{out / 'vocab.txt'}'",
              f"RUN_DIR = '{run_dir}'",
              *stages.finetune_bindings(config, runs / "ict", runs / "bert")]
  return [str(cli), "train", "--gin_file=runs/finetune.gin", "--gin_file=datasets/nq.gin",
          "--gin_file=experiments/orqa.gin", f"--gin_file={config.size_gin}",
          *(f"--gin_bindings={b}" for b in bindings)]


def _start(command: list[str], core: int | None) -> subprocess.Popen:
  env = dict(os.environ, GLIBC_TUNABLES=malloc.makefile_tunables())
  if core is not None:
    env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {ONE_THREAD}".strip()
  return subprocess.Popen(
      command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
      preexec_fn=None if core is None else (lambda: os.sched_setaffinity(0, {core})))


def _finish(proc: subprocess.Popen, run_dir: Path) -> dict:
  _, err = proc.communicate()
  if proc.returncode:
    raise SystemExit(f"stage_lanes.py: a fine-tuning exited {proc.returncode}:\n"
                     + "\n".join(err.strip().splitlines()[-5:]))
  return json.loads((run_dir / "record.json").read_text())["metrics"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("out", type=Path)
  parser.add_argument("--steps", type=int, default=300)
  args = parser.parse_args(argv)
  if args.steps < 1:
    parser.error(f"--steps: {args.steps} is not a whole number of at least 1")
  cores = sorted(os.sched_getaffinity(0))
  if len(cores) < 2:
    raise SystemExit(f"stage_lanes.py: needs two cores, this process may use {len(cores)}")
  runs = malloc._runs_dir(args.out)  # pylint: disable=protected-access
  with tempfile.TemporaryDirectory() as tmp:
    alone_dir = Path(tmp) / "alone"
    command = _command(args.out, runs, alone_dir, args.steps)
    start = time.perf_counter()
    alone = _finish(_start(command, None), alone_dir)
    alone_wall = time.perf_counter() - start
    lane_dirs = [Path(tmp) / f"lane_{core}" for core in cores[:2]]
    start = time.perf_counter()
    procs = [_start(_command(args.out, runs, d, args.steps), core)
             for d, core in zip(lane_dirs, cores)]
    lanes = [_finish(p, d) for p, d in zip(procs, lane_dirs)]
    lanes_wall = time.perf_counter() - start
  print(f"ORQA fine-tuning, {args.steps} steps of 12 from {runs} (start-up included), "
        f"Makefile malloc settings\ncommand: {' '.join(command)}\n")
  print("| how | stages | wall s | stages per hour | throughput / alone |")
  print("|---|---:|---:|---:|---:|")
  print(f"| alone, XLA's default threads | 1 | {alone_wall:.1f} | {3600 / alone_wall:.1f} | 1.00 |")
  print(f"| two lanes, one core and one XLA thread each | 2 | {lanes_wall:.1f} | "
        f"{7200 / lanes_wall:.1f} | {2 * alone_wall / lanes_wall:.2f} |")
  same = lanes[0] == lanes[1]
  print(f"\nthe two lanes' last-step metrics equal: {same}; equal to the two-thread run's: "
        f"{lanes[0] == alone}")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
