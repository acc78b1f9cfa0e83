"""A fine-tuning's wall time with glibc's default malloc against the Makefile's settings.

XLA's CPU runtime allocates each execution's temporaries as one buffer (strace shows a
303 MB munmap per step of the quickstart's Open-QA fine-tuning). Above glibc's mmap
threshold (at most 32 MB) every such allocation is a fresh mmap, so each step faults its pages
in again and unmaps them: E100's one-seed reproduction spent 3,031 s of system time against
7,178 s of user time. The Makefile's GLIBC_TUNABLES
(one arena, no mmap, no trimming) keep the freed buffer in the heap for the next step.

  python benchmarks/malloc.py OUT [--steps 300]

OUT is a quickstart's or a reproduction's folder (its world, vocabulary, BERT and ICT runs).
Both runs are the same ORQA fine-tuning (`realm-bench train` with the quickstart's bindings,
`stages.finetune_bindings`, a fresh run folder each) in child processes; their last-step
metrics must be equal, since the allocator does not touch the arithmetic.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from realm_bench import stages

MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"


def makefile_tunables(makefile: Path = MAKEFILE) -> str:
  """The Makefile's MALLOC_TUNABLES: one definition for the long runs and this benchmark."""
  for line in makefile.read_text().splitlines():
    name, sep, value = line.partition(":=")
    if sep and name.strip() == "MALLOC_TUNABLES":
      return value.strip()
  raise SystemExit(f"{makefile}: no MALLOC_TUNABLES := ... line")


def at_least_one(text: str) -> int:
  """An argparse type: a whole number of at least 1 (steps, repeats)."""
  try:
    value = int(text)
  except ValueError:
    value = 0
  if value < 1:
    raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
  return value


def runs_dir(out: Path) -> Path:
  """The runs folder of a quickstart's or a reproduction's --out folder (its BERT and ICT)."""
  for candidate in (out / "runs", out / "seed_0" / "runs"):
    if (candidate / "ict").is_dir() and (candidate / "bert").is_dir():
      return candidate
  raise SystemExit(f"{out}: no runs/ict and runs/bert (nor seed_0/runs/...): give a "
                   "quickstart's or a reproduction's --out folder")


def finetune_command(out: Path, runs: Path, run_dir: Path, steps: int) -> list[str]:
  """`realm-bench train` of an ORQA fine-tuning with the quickstart's bindings into run_dir."""
  cli = Path(sys.executable).with_name("realm-bench")
  config = stages.QuickstartConfig(finetune_steps=steps)
  bindings = [f"WORLD_DIR = '{out / 'world'}'", f"VOCAB_PATH = '{out / 'vocab.txt'}'",
              f"RUN_DIR = '{run_dir}'",
              *stages.finetune_bindings(config, runs / "ict", runs / "bert")]
  return [str(cli), "train", "--gin_file=runs/finetune.gin", "--gin_file=datasets/nq.gin",
          "--gin_file=experiments/orqa.gin", f"--gin_file={config.size_gin}",
          *(f"--gin_bindings={b}" for b in bindings)]


def failed(script: str, what: str, proc) -> SystemExit:
  """The error a benchmark exits with when a child run failed: the tail of its stderr."""
  return SystemExit(f"{script}: {what} exited {proc.returncode}:\n"
                    + "\n".join((proc.stderr or "").strip().splitlines()[-5:]))


def _finetune(out: Path, runs: Path, run_dir: Path, steps: int, tunables: str | None):
  env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
  if tunables:
    env["GLIBC_TUNABLES"] = tunables
  command = finetune_command(out, runs, run_dir, steps)
  before = resource.getrusage(resource.RUSAGE_CHILDREN)
  start = time.perf_counter()
  proc = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                        text=True, check=False)
  if proc.returncode:
    raise failed("malloc.py", "the fine-tuning", proc)
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_CHILDREN)
  metrics = json.loads((run_dir / "record.json").read_text())["metrics"]
  return {"wall": wall, "user": after.ru_utime - before.ru_utime,
          "sys": after.ru_stime - before.ru_stime,
          "faults": after.ru_minflt - before.ru_minflt, "metrics": metrics,
          "command": " ".join(command)}


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("out", type=Path)
  parser.add_argument("--steps", type=at_least_one, default=300)
  args = parser.parse_args(argv)
  runs = runs_dir(args.out)
  rows = {}
  with tempfile.TemporaryDirectory() as tmp:
    for name, tunables in (("glibc default", None),
                           ("Makefile GLIBC_TUNABLES", makefile_tunables())):
      rows[name] = _finetune(args.out, runs, Path(tmp) / name.replace(" ", "_"), args.steps,
                             tunables)
  base = rows["glibc default"]
  print(f"ORQA fine-tuning, {args.steps} steps of 12 from {runs} (startup included)\n"
        f"command: {base['command']}\n")
  print("| malloc | wall s | user s | sys s | minor faults | wall / default |")
  print("|---|---:|---:|---:|---:|---:|")
  for name, r in rows.items():
    print(f"| {name} | {r['wall']:.1f} | {r['user']:.1f} | {r['sys']:.1f} | "
          f"{r['faults']:,} | {r['wall'] / base['wall']:.2f} |")
  same = rows["Makefile GLIBC_TUNABLES"]["metrics"] == base["metrics"]
  print(f"\nlast-step metrics equal: {same}")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
