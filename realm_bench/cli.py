"""The one console script, `realm-bench <command>`.

Arguments are declared here and the work is imported lazily from the module that owns it, so
`realm-bench --help` answers at once instead of first loading TensorFlow and JAX.
Any `--gin.KEY=VALUE` argument is a gin binding, applied after the `--gin_file`s.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable

from realm_bench.errors import InputError
from realm_bench.gin_utils import split_gin_args

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _gin_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--gin_file", action="append", default=[],
                 help="gin file (repeatable); looked up here, then in the shipped gin/ folder")
  p.epilog = "Any --gin.KEY=VALUE argument is a gin binding applied after the gin files."


def _runs_arg(p: argparse.ArgumentParser) -> None:
  p.add_argument("--runs", default="results/runs",
                 help="folder searched recursively for record.json files (default: %(default)s)")


def _world(p):
  p.add_argument("--out", required=True, help="folder to write the synthetic world into")
  _gin_args(p)


def _vocab(p):
  p.add_argument("--world", help="learn from a synthetic world folder (its corpus and text)")
  p.add_argument("--text", action="append", default=[],
                 help="JSONL or TSV corpus file to learn from (repeatable)")
  p.add_argument("--size", type=int, default=4000, help="target vocabulary size")
  p.add_argument("--out", required=True, help="vocab.txt to write")


def _tasks(p):
  p.add_argument("name", nargs="?", help="task to show; lists all tasks when omitted")
  p.add_argument("--split", default="validation")
  p.add_argument("--num", type=int, default=3, help="examples to print")
  _gin_args(p)


def _score(p):
  p.add_argument("--references", required=True, help='JSONL {"question", "answer": [...]}')
  p.add_argument("--predictions", required=True, help='JSONL {"question", "prediction"}')
  p.add_argument("--regex", action="store_true",
                 help="answers are regular expressions matched at the prediction's start "
                      "(CuratedTREC)")
  p.add_argument("--per-example", dest="per_example", help="write a per-question JSONL here")


def _tables(p):
  _runs_arg(p)
  p.add_argument("--format", default="md", help="comma-separated: md,csv,tex,html")
  p.add_argument("--out", default="results/tables", help="output folder (default: %(default)s)")


def _check(p):
  _runs_arg(p)
  p.add_argument("--strict", action="store_true", help="MISSING cells fail too")


def _entry(p):
  _gin_args(p)


def _sweep(p):
  p.add_argument("--out", default="results/runs/staleness",
                 help="folder for the world, vocabulary and runs (default: %(default)s)")
  p.add_argument("--values", help="comma-separated refresh intervals in steps, e.g. 1,3,10,30 "
                                  "(default: SweepConfig.values of the gin files)")
  _gin_args(p)


def _quickstart(p):
  p.add_argument("--out", default="results/runs/quickstart",
                 help="folder for the world, vocabulary and runs (default: %(default)s)")
  _gin_args(p)


# name -> (help, argument builder, "module:function" that takes (args, gin_bindings)).
COMMANDS: dict[str, tuple[str, Callable, str]] = {
    "quickstart": ("the whole pipeline on the synthetic world", _quickstart,
                   "realm_bench.quickstart:cli_main"),
    "sweep": ("the index-staleness sweep: one pre-training + fine-tuning per refresh interval",
              _sweep, "realm_bench.sweep:cli_main"),
    "train": ("train a model (ICT, REALM pre-training or Open-QA fine-tuning) from gin files",
              _entry, "realm_bench.entry:train"),
    "evaluate": ("exact match of a fine-tuned Open-QA run; writes a run record", _entry,
                 "realm_bench.entry:evaluate"),
    "recall": ("zero-shot Recall@k of a retriever; writes a run record", _entry,
               "realm_bench.entry:evaluate_retrieval"),
    "index": ("embed a corpus with a run's document tower and build a MIPS index", _entry,
              "realm_bench.entry:index"),
    "infer": ("write predictions of a fine-tuned run in the ORQA format", _entry,
              "realm_bench.entry:infer"),
    "world": ("generate the synthetic world", _world, "realm_bench.tasks.world:cli_main"),
    "vocab": ("learn a WordPiece vocabulary from a corpus", _vocab,
              "realm_bench.tasks.vocab:cli_main"),
    "tasks": ("list the seqio tasks, or show examples of one", _tasks,
              "realm_bench.tasks.show:cli_main"),
    "score": ("score a predictions file as the official Open-QA evaluation does", _score,
              "realm_bench.score:cli_main"),
    "tables": ("regenerate the leaderboard tables from run records", _tables,
               "realm_bench.reporting.tables:cli_main"),
    "check": ("check run records against the reported numbers and the specs' claims", _check,
              "realm_bench.reporting.check:cli_main"),
}


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="realm-bench", description=__doc__.splitlines()[0])
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  for name, (help_text, add_arguments, _) in COMMANDS.items():
    p = sub.add_parser(name, help=help_text, description=help_text)
    add_arguments(p)
  return parser


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  try:
    rest, bindings = split_gin_args(argv)
    args = build_parser().parse_args(rest)
    module_name, func_name = COMMANDS[args.command][2].split(":")
    handler = getattr(importlib.import_module(module_name), func_name)
    return int(handler(args, bindings) or 0)
  except InputError as e:
    print(f"realm-bench {argv[0] if argv else ''}: error: {e}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
