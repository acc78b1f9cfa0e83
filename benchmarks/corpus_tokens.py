"""A short stage's wall time when it tokenises the corpus itself against reading a shared copy.

Every stage that reads the knowledge corpus needs its token files (pipelines/token_file.py).
Made in each run's folder, a reproduction seed tokenises the corpus once per stage, about 55
times; with CORPUS_TOKENS_DIR the stages share one copy. This times one zero-shot recall stage
(ICT's, on NQ dev: start-up, corpus, embedding, search) both ways.

  python benchmarks/corpus_tokens.py OUT [--repeats 2]

OUT is a quickstart's or a reproduction's folder (its world, vocabulary and ICT run). The stage
is the record's own command (`OUT/runs/ict_recall_dev/record.json`), run in child processes
under the Makefile's malloc settings, each into a fresh run folder: "own" tokenises into it,
"shared" reads a copy the first, untimed, run made. Both must record the same Recall@5.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import malloc  # pylint: disable=g-import-not-at-top,wrong-import-position


def _recall_command(out: Path) -> list[str]:
  runs = malloc.runs_dir(out)
  record = runs / "ict_recall_dev" / "record.json"
  if not record.exists():
    raise SystemExit(f"corpus_tokens.py: {record}: no such file (run the quickstart first)")
  argv = shlex.split(json.loads(record.read_text())["command"])
  keep = [a for a in argv[1:] if not a.startswith(("--gin.RUN_DIR=", "--gin.CORPUS_TOKENS_DIR="))]
  return [str(Path(sys.executable).with_name("realm-bench")), *keep]


def _run(command: list[str], run_dir: Path, tokens: Path | None) -> tuple[float, float]:
  flags = [f"--gin.RUN_DIR='{run_dir}'"]
  if tokens is not None:
    flags.append(f"--gin.CORPUS_TOKENS_DIR='{tokens}'")
  env = dict(os.environ, GLIBC_TUNABLES=malloc.makefile_tunables())
  start = time.perf_counter()
  proc = subprocess.run([*command, *flags], env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.PIPE, text=True, check=False)
  wall = time.perf_counter() - start
  if proc.returncode:
    raise malloc.failed("corpus_tokens.py", "the stage", proc)
  return wall, json.loads((run_dir / "record.json").read_text())["metrics"]["recall@5"]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("out", type=Path)
  parser.add_argument("--repeats", type=malloc.at_least_one, default=2)
  args = parser.parse_args(argv)
  command = _recall_command(args.out)
  walls: dict[str, list[float]] = {"own": [], "shared": []}
  recalls = set()
  with tempfile.TemporaryDirectory() as tmp:
    tokens = Path(tmp) / "corpus_tokens"
    recalls.add(_run(command, Path(tmp) / "make_shared", tokens)[1])   # makes the copy
    for i in range(args.repeats):   # interleaved, so a change in load hits both
      for how in walls:
        wall, recall = _run(command, Path(tmp) / f"{how}_{i}", tokens if how == "shared" else None)
        walls[how].append(wall)
        recalls.add(recall)
  own = min(walls["own"])
  print("zero-shot recall stage (ICT, NQ dev), start-up included, Makefile malloc settings\n"
        f"command: {' '.join(command)} --gin.RUN_DIR=...\n")
  print(f"| corpus token files | runs | wall s (best) | wall s (each) | best / own |")
  print("|---|---:|---:|---|---:|")
  for how, values in walls.items():
    print(f"| {how} | {len(values)} | {min(values):.1f} | "
          f"{', '.join(f'{v:.1f}' for v in values)} | {min(values) / own:.2f} |")
  same = len(recalls) == 1
  print(f"\nthe same Recall@5 every run: {same} ({', '.join(f'{r:.2f}' for r in sorted(recalls))})")
  return 0 if same else 1


if __name__ == "__main__":
  sys.exit(main())
