"""Two stages at once, one core each, against one stage on both cores.

The quickstart's networks are small (2 layers x 128): a fine-tuning step reaches about 7% of
the fp32 matmul peak (`train_step.py`), and XLA's CPU runtime splits such steps over two
threads poorly. If two single-threaded stages side by side finish more work per second than
one stage on both cores, `reproduce` can run its independent stages (the fine-tunings of one
pre-trained run, the evaluations) in two lanes.

  python benchmarks/stage_lanes.py OUT [--steps 300]

OUT is a quickstart's or a reproduction's folder (its world, vocabulary, BERT and ICT runs).
Every run is the same ORQA fine-tuning (`malloc.finetune_command`: `realm-bench train` with the
quickstart's bindings), a fresh run folder each, under the Makefile's malloc settings: first
alone with XLA's default threads, then two at once as `reproduce --lanes 2` starts its lanes
(`lanes.run_lanes`: each pinned to its own core with one XLA thread). The single-threaded pair
must end on the same metrics as each other (deterministic); whether they equal the two-thread
run's is printed, not required (another thread count may sum in another order).
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

from realm_bench import lanes
from realm_bench.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import malloc  # pylint: disable=g-import-not-at-top,wrong-import-position


def _metrics(run_dir: Path) -> dict:
  return json.loads((run_dir / "record.json").read_text())["metrics"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("out", type=Path)
  parser.add_argument("--steps", type=malloc.at_least_one, default=300)
  args = parser.parse_args(argv)
  cores = sorted(os.sched_getaffinity(0))
  if len(cores) < 2:
    raise SystemExit(f"stage_lanes.py: needs two cores, this process may use {len(cores)}")
  runs = malloc.runs_dir(args.out)
  os.environ["GLIBC_TUNABLES"] = malloc.makefile_tunables()   # every child's, as `make` sets it
  with tempfile.TemporaryDirectory() as tmp:
    alone_dir = Path(tmp) / "alone"
    command = malloc.finetune_command(args.out, runs, alone_dir, args.steps)
    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    alone_wall = time.perf_counter() - start
    if proc.returncode:
      raise malloc.failed("stage_lanes.py", "the fine-tuning", proc)
    alone = _metrics(alone_dir)
    # The lanes as `reproduce --lanes 2` starts them: pinned, one XLA thread each.
    lane_dirs = [Path(tmp) / f"lane_{i}" for i in range(2)]
    start = time.perf_counter()
    lanes.run_lanes(lambda i: malloc.finetune_command(args.out, runs, lane_dirs[i], args.steps), 2)
    lanes_wall = time.perf_counter() - start
    pair = [_metrics(d) for d in lane_dirs]
  print(f"ORQA fine-tuning, {args.steps} steps of 12 from {runs} (start-up included), "
        f"Makefile malloc settings\ncommand: {' '.join(command)}\n")
  print("| how | stages | wall s | stages per hour | throughput / alone |")
  print("|---|---:|---:|---:|---:|")
  print(f"| alone, XLA's default threads | 1 | {alone_wall:.1f} | {3600 / alone_wall:.1f} | 1.00 |")
  print(f"| two lanes, one core and one XLA thread each | 2 | {lanes_wall:.1f} | "
        f"{7200 / lanes_wall:.1f} | {2 * alone_wall / lanes_wall:.2f} |")
  same = pair[0] == pair[1]
  print(f"\nthe two lanes' last-step metrics equal: {same}; equal to the two-thread run's: "
        f"{pair[0] == alone}")
  return 0 if same else 1


if __name__ == "__main__":
  try:
    sys.exit(main())
  except InputError as e:   # a lane failed; its error is above
    sys.exit(f"stage_lanes.py: {e}")
