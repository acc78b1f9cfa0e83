"""CLI handlers for the gin-driven entry functions (`realm-bench train|evaluate|recall|index|infer`).

Each handler imports the entry function's module for real, so the gin files' dynamic
registrations (`from realm_bench import train as train_lib`) resolve to these same objects.
"""
from __future__ import annotations

import json
import sys

from realm_bench.gin_utils import run_entry


def train(args, gin_bindings) -> int:
  from realm_bench import train as train_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.trainer import TrainingDiverged  # pylint: disable=g-import-not-at-top
  try:
    summary = run_entry(train_lib.train, args.gin_file, gin_bindings)
  except TrainingDiverged as e:
    print(f"realm-bench train: {e}", file=sys.stderr)
    return 3
  print(json.dumps({k: summary[k] for k in ("run_dir", "steps", "final_metrics")}))
  return 0


def evaluate(args, gin_bindings) -> int:
  from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
  print(json.dumps(run_entry(eval_lib.evaluate, args.gin_file, gin_bindings)))
  return 0


def evaluate_retrieval(args, gin_bindings) -> int:
  from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
  print(json.dumps(run_entry(eval_lib.evaluate_retrieval, args.gin_file, gin_bindings)))
  return 0


def index(args, gin_bindings) -> int:
  from realm_bench import indexing  # pylint: disable=g-import-not-at-top
  run_entry(indexing.index, args.gin_file, gin_bindings)
  return 0


def infer(args, gin_bindings) -> int:
  from realm_bench import infer as infer_lib  # pylint: disable=g-import-not-at-top
  print(run_entry(infer_lib.infer, args.gin_file, gin_bindings))
  return 0
