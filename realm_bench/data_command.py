"""`realm-bench data ACTION`: its flags and handler, apart from cli.py so the one console script
stays within the module size limit as commands are added.

As in cli.py, the work is imported inside the handler, so `realm-bench --help` stays fast.
"""
from __future__ import annotations

import json
import sys

from realm_bench.errors import InputError


def add_arguments(p) -> None:
  actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
  r = actions.add_parser("resplit", formatter_class=p.formatter_class,
                         help="ORQA's train / dev / test split of a benchmark's released files")
  r.add_argument("--name", required=True, help="nq, wq or trec (or NaturalQuestions, ...)")
  r.add_argument("--train", required=True,
                 help="the released train file (JSON lines, DPR's .csv or biencoder .json)")
  r.add_argument("--test", required=True,
                 help="the released test file (NQ-Open: its dev file), same formats")
  r.add_argument("--out", required=True,
                 help="folder for train/dev/test.jsonl: DATA_DIR/open_qa/{nq,wq,trec}")
  c = actions.add_parser("convert", formatter_class=p.formatter_class,
                         help="a question file (DrQA .txt, DPR .csv or biencoder .json, "
                              "NQ-Open / EfficientQA .jsonl) as the tasks' JSON lines")
  c.add_argument("--from", dest="source", required=True, help="the question file to read")
  c.add_argument("--format", choices=("jsonl", "dpr-qa", "dpr-biencoder"), default=None,
                 help="what --from holds (default: told from how the file starts)")
  c.add_argument("--answer_field", "--answer-field", dest="answer_field", default="answer",
                 help="the JSON lines' answer field (EfficientQA: "
                      "answer_and_def_correct_predictions)")
  c.add_argument("--out", required=True, help="the .jsonl to write, e.g. "
                                              "DATA_DIR/open_qa/nq/test.jsonl")
  k = actions.add_parser("check", formatter_class=p.formatter_class,
                         help="every file under DATA_DIR: format, rows and distinct questions "
                              "against the paper's sizes, and each problem as file:line:field")
  k.add_argument("data_dir", metavar="DATA_DIR", help="the real-data folder")
  k.add_argument("--json", action="store_true", help="print the report as one JSON object")


def run(args, bindings) -> int:
  if bindings:
    raise InputError(f"`data` takes no gin bindings, got {bindings[0]!r}")
  if args.action == "convert":
    from realm_bench import data_convert  # pylint: disable=g-import-not-at-top
    print(json.dumps(data_convert.convert_questions(
        source=args.source, out=args.out, fmt=args.format, answer_field=args.answer_field)))
    return 0
  if args.action == "check":
    from realm_bench import data_check  # pylint: disable=g-import-not-at-top
    report = data_check.check(data_dir=args.data_dir)
    print(json.dumps(report) if args.json else data_check.format_report(report))
    return 1 if report["problems"] else 0
  from realm_bench import data_splits  # pylint: disable=g-import-not-at-top
  counts = data_splits.resplit(name=args.name, train=args.train, test=args.test, out=args.out)
  print(json.dumps(counts))
  for split, expected in counts["differs_from_released"].items():
    print(f"note: {split} has {counts[split]} questions; the released split has {expected}",
          file=sys.stderr)
  return 0
