"""The one console script, `realm-bench <command>`: every command's flags and handler.

Arguments are declared here and the work is imported lazily inside each handler, so
`realm-bench --help` answers at once instead of first loading TensorFlow and JAX. The
gin-driven commands import their entry function's module for real, so the gin files' dynamic
registrations (`from realm_bench import train as train_lib`) resolve to those same objects.
Any `--gin.KEY=VALUE` argument is a gin binding, applied after the `--gin_file`s.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Callable

from realm_bench import data_command, tf_runtime
from realm_bench.errors import InputError
from realm_bench.gin_utils import (parse_gin, refuse_unread_macros, run_entry, split_gin_args,
                                   split_search_paths)
from realm_bench.preprocess import command as blocks_command
from realm_bench.reporting.records import recording_command

tf_runtime.quiet_logs()   # before anything imports TensorFlow


# ------------------------------------------------------------------------------------------
# Arguments.
# ------------------------------------------------------------------------------------------

def _gin_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--gin_file", action="append", default=[],
                 help="gin file (repeatable); looked up in the working directory, then in "
                      "the --gin_search_paths, then in the shipped gin/ folder")
  p.add_argument("--gin_bindings", action="append", default=[],
                 help="a gin binding such as 'NUM_STEPS = 100' (repeatable), applied after "
                      "the gin files, as in t5x")
  p.add_argument("--gin_search_paths", action="append", default=[],
                 help="comma-separated folders where --gin_file and `include` look for gin "
                      "files (repeatable)")
  p.epilog = ("Any --gin.KEY=VALUE argument is a gin binding applied after the gin files and "
              "--gin_bindings. A macro set on the command line or in your own gin file that "
              "nothing reads is an error.")


def _gin_sources(args) -> dict:
  """The keyword arguments of run_entry / parse_gin that the gin flags give."""
  return {"search_paths": split_search_paths(getattr(args, "gin_search_paths", []))}


def _runs_arg(p: argparse.ArgumentParser) -> None:
  p.add_argument("--runs", default="results/runs",
                 help="folder searched recursively for record.json files")


def _resources_args(p: argparse.ArgumentParser) -> None:
  p.add_argument("--specs", default=None,
                 help="folder of table spec YAML files (default: the shipped results/specs)")
  p.add_argument("--reported", default=None,
                 help="YAML file of reported numbers (default: the shipped "
                      "results/reported/realm_2020.yaml)")


def _world_args(p):
  p.add_argument("--out", required=True, help="folder to write the synthetic world into")
  p.add_argument("--stats", action="store_true",
                 help="also measure the fitness gates (BM25, random and oracle recall, answer "
                      "prior, gold-block recall) of every benchmark's dev split and write them "
                      "to OUT/gates.json (default: off)")
  _gin_args(p)


def _vocab_args(p):
  p.add_argument("--world", help="learn from a synthetic world folder (its corpus and text)")
  p.add_argument("--text", action="append", default=[],
                 help="JSONL or TSV corpus file to learn from (repeatable)")
  p.add_argument("--size", type=int, default=4000, help="target vocabulary size")
  p.add_argument("--out", required=True, help="vocab.txt to write")


def _tasks_args(p):
  p.add_argument("name", nargs="?", help="task to show; lists all tasks when omitted")
  p.add_argument("--split", default="validation", help="split to show examples of")
  p.add_argument("--num", type=int, default=3, help="examples to print")
  _gin_args(p)


def _score_args(p):
  p.add_argument("--references", required=True,
                 help='questions with gold answers: JSON lines {"question", "answer": [...]} '
                      "(NQ-Open, EfficientQA, DrQA's .txt), DPR's .csv or biencoder .json")
  p.add_argument("--answer_field", "--answer-field", dest="answer_field", default="answer",
                 help="the JSON lines' answer field; EfficientQA's test file also has "
                      "answer_and_def_correct_predictions (answers plus the ones its raters "
                      "judged definitely correct)")
  p.add_argument("--predictions", required=True, help='JSONL {"question", "prediction"}')
  p.add_argument("--regex", action="store_true",
                 help="answers are regular expressions matched at the prediction's start "
                      "(CuratedTREC)")
  p.add_argument("--per_example", "--per-example", dest="per_example",
                 help="write a per-question JSONL here")


def _tables_args(p):
  _runs_arg(p)
  p.add_argument("--format", default="md",
                 help="comma-separated: md,csv,tex,html; html also writes OUT/leaderboard.html, "
                      "one self-contained page of every table, the check's verdicts and each "
                      "row's commit and gin configs")
  p.add_argument("--out", default="results/tables", help="output folder")
  _resources_args(p)


def _check_args(p):
  _runs_arg(p)
  p.add_argument("--strict", action="store_true",
                 help="MISSING and INCONCLUSIVE verdicts fail too (exit 1): every cell needs "
                      "records and every claim a decisive interval")
  p.add_argument("--format", default="text", choices=("text", "json", "junit"),
                 help="text (a table), json (one object per verdict) or junit (JUnit XML, one "
                      "test case per cell and claim, for CI); json and junit go to stdout, "
                      "the summary line to stderr")
  p.add_argument("--spec", action="append", default=[],
                 help="check only this table spec id, e.g. table2 (repeatable)")
  p.add_argument("--verbose", action="store_true",
                 help="list MISSING rows one by one instead of counting them")
  _resources_args(p)


def _sweep_args(p):
  p.add_argument("--out", default="results/runs/staleness",
                 help="folder for the world, vocabulary and runs")
  p.add_argument("--values", help="comma-separated refresh intervals in steps, e.g. "
                                  "20,60,200,600 (default: SweepConfig.values of the gin files)")
  _gin_args(p)


def _convert_args(p):
  p.add_argument("--from", dest="sources", action="append", default=[], required=True,
                 help="checkpoint to read (repeatable, one run folder of them all): a Hugging "
                      "Face save_pretrained folder, a TF checkpoint prefix or folder, or a "
                      "TF-Hub module folder")
  p.add_argument("--format", required=True,
                 choices=("hf-bert", "hf-realm", "tf-bert", "tf-realm", "tf-orqa"),
                 help="what --from holds")
  p.add_argument("--out", required=True, help="run folder to write (must not exist)")
  p.add_argument("--vocab", help="vocab.txt of the weights (default: the one beside --from, "
                                 "or in its assets/)")
  p.add_argument("--bert_config", "--bert-config", dest="bert_config",
                 help="bert_config.json of a TF checkpoint (default: the one beside it)")

def _reproduce_args(p):
  p.add_argument("--out", default="results/runs/reproduce",
                 help="folder for the world, vocabulary, seed_N/runs, tables and check output")
  p.add_argument("--seeds", type=int, default=None,
                 help="how many seeds (0, 1, ... N-1; each varies SEED: model and data order) "
                      "(default: ReproduceConfig.seeds of the gin files, 3)")
  p.add_argument("--smoke", action="store_true",
                 help="every row end to end on the tiny world with a handful of steps "
                      "(runs/reproduce_smoke.gin): checks the plumbing, not the claims")
  p.add_argument("--dry_run", "--dry-run", dest="dry_run", action="store_true",
                 help="list the stages left and the estimated time, run nothing")
  p.add_argument("--lanes", type=int, default=None,
                 help="processes running independent stages side by side, one core and one "
                      "XLA thread each (default: ReproduceConfig.lanes of the gin files, 1)")
  p.add_argument("--lane", type=int, default=None, help=argparse.SUPPRESS)   # a lane's process
  _gin_args(p)


def _quickstart_args(p):
  p.add_argument("--out", default="results/runs/quickstart",
                 help="folder for the world, vocabulary and runs")
  _gin_args(p)


# ------------------------------------------------------------------------------------------
# Handlers: (args, gin bindings) -> exit code.
# ------------------------------------------------------------------------------------------

def _no_bindings(command: str, bindings) -> None:
  if bindings:
    raise InputError(f"`{command}` takes no gin bindings, got {bindings[0]!r}")


def _stage_configs(run_files, args, bindings, extra: str | None = None):
  """The QuickstartConfig of `run_files` + the user's files (and the configurable named
  `extra`, e.g. the SweepConfig), and the world's config from the world gin it names with the
  same bindings (so --gin.WorldConfig.seed=3 changes the world)."""
  import gin  # pylint: disable=g-import-not-at-top
  from realm_bench import quickstart as quickstart_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  stages = parse_gin([*run_files, *args.gin_file], bindings, **_gin_sources(args))
  config = quickstart_lib.QuickstartConfig()
  extra = None if extra is None else gin.get_configurable(extra)()
  world = parse_gin([config.world_gin, *args.gin_file], bindings, **_gin_sources(args))
  world_config = world_lib.WorldConfig()
  gin.clear_config()
  refuse_unread_macros([stages, world], bindings)
  return config, world_config, extra


def quickstart(args, bindings) -> int:
  from realm_bench import quickstart as quickstart_lib  # pylint: disable=g-import-not-at-top
  config, world_config, _ = _stage_configs(["runs/quickstart.gin"], args, bindings)
  quickstart_lib.run(out_dir=args.out, config=config, world_config=world_config)
  return 0


def sweep(args, bindings) -> int:
  from realm_bench import sweep as sweep_lib  # pylint: disable=g-import-not-at-top
  # An empty `--values=` is refused, not read as "the default sweep".
  values = None if args.values is None else sweep_lib.parse_values(args.values)
  stages, world_config, config = _stage_configs(["runs/sweep.gin"], args, bindings,
                                                 extra="realm_bench.sweep.SweepConfig")
  if values is not None:
    config = dataclasses.replace(config, values=values)
  sweep_lib.run(out_dir=args.out, sweep=config, stages=stages, world_config=world_config)
  return 0


def reproduce(args, bindings) -> int:
  from realm_bench import reproduce as reproduce_lib  # pylint: disable=g-import-not-at-top
  if args.seeds is not None:
    reproduce_lib.validate_seeds(args.seeds)
    bindings = [*bindings, f"ReproduceConfig.seeds = {args.seeds}"]
  if args.lanes is not None:
    bindings = [*bindings, f"ReproduceConfig.lanes = {args.lanes}"]
  run_files = ["runs/reproduce.gin"] + (["runs/reproduce_smoke.gin"] if args.smoke else [])
  stages, world_config, config = _stage_configs(
      run_files, args, bindings, extra="realm_bench.reproduce.ReproduceConfig")
  command = " ".join(["realm-bench reproduce", f"--seeds {config.seeds}", f"--out {args.out}",
                      *(["--smoke"] if args.smoke else [])])

  def lane_command(lane: int) -> list[str]:
    """This command again as lane `lane`'s process, with the same gin files and bindings."""
    return [sys.executable, "-m", "realm_bench.cli", "reproduce", "--out", args.out,
            "--lane", str(lane), *(["--smoke"] if args.smoke else []),
            *(f"--gin_search_paths={p}" for p in args.gin_search_paths),
            *(f"--gin_file={f}" for f in args.gin_file),
            *(f"--gin_bindings={b}" for b in bindings)]

  reproduce_lib.run(out_dir=args.out, config=config, stages=stages, world_config=world_config,
                    dry_run=args.dry_run, command=command, lane_command=lane_command,
                    lane=args.lane)
  return 0


def train(args, bindings) -> int:
  from realm_bench import train as train_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.trainer import TrainingDiverged  # pylint: disable=g-import-not-at-top
  try:
    record = run_entry(train_lib.train, args.gin_file, bindings, **_gin_sources(args))
  except TrainingDiverged as e:
    print(f"realm-bench train: {e}", file=sys.stderr)
    return 3
  print(json.dumps({"run_id": record.run_id, "steps": record.steps,
                    "final_metrics": record.metrics}))
  return 0


def evaluate(args, bindings) -> int:
  from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
  print(json.dumps(run_entry(eval_lib.evaluate, args.gin_file, bindings,
                             **_gin_sources(args))))
  return 0


def recall(args, bindings) -> int:
  from realm_bench import eval as eval_lib  # pylint: disable=g-import-not-at-top
  print(json.dumps(run_entry(eval_lib.evaluate_retrieval, args.gin_file, bindings,
                             **_gin_sources(args))))
  return 0


def index(args, bindings) -> int:
  from realm_bench import indexing  # pylint: disable=g-import-not-at-top
  run_entry(indexing.index, args.gin_file, bindings, **_gin_sources(args))
  return 0


def infer(args, bindings) -> int:
  from realm_bench import infer as infer_lib  # pylint: disable=g-import-not-at-top
  print(run_entry(infer_lib.infer, args.gin_file, bindings, **_gin_sources(args)))
  return 0


def _world_summary(manifest: dict, out_dir) -> str:
  from realm_bench.tasks.world import BENCHMARKS, SPLITS  # pylint: disable=g-import-not-at-top
  c = manifest["counts"]
  q = "; ".join(f"{b} " + "/".join(str(c["questions"][b][s]) for s in SPLITS)
                for b in BENCHMARKS)
  return (f"Synthetic world (generator {manifest['generator_version']}, seed {manifest['seed']}) "
          f"written to {out_dir}: {c['entities']} entities ({c['people']} people, {c['places']} "
          f"places, {c['organisations']} organisations, of which {c['distractors']} are "
          f"near-name distractors), {c['blocks']} corpus blocks, {c['facts']} asked facts "
          f"(train/dev/test {'/'.join(str(c['facts_per_split'][s]) for s in SPLITS)}) and "
          f"{c['minor_facts']} minor ones, {c['pretrain_sentences']} pre-training sentences; "
          f"questions train/dev/test: {q}.")


def world(args, bindings) -> int:
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  parse_gin(args.gin_file or ["world/default.gin"], bindings, strict=True, **_gin_sources(args))
  manifest = world_lib.generate(out_dir=args.out, config=world_lib.WorldConfig())
  print(_world_summary(manifest, args.out))
  if args.stats:
    from realm_bench import world_gates  # pylint: disable=g-import-not-at-top
    from realm_bench.io_utils import atomic_write_text  # pylint: disable=g-import-not-at-top
    measured = {b: world_gates.gates(args.out, benchmark=b) for b in ("nq", "wq", "trec")}
    for benchmark, g in measured.items():
      print(f"\nfitness gates, {benchmark} dev:\n{world_gates.format_gates(g)}")
    atomic_write_text(Path(args.out) / "gates.json", json.dumps(measured, indent=1) + "\n")
  return 0


def vocab(args, bindings) -> int:
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  _no_bindings("vocab", bindings)
  if bool(args.world) == bool(args.text):
    raise InputError("give either --world DIR or one or more --text FILE")
  if args.world:
    root = Path(args.world)
    if not root.is_dir():
      raise InputError("world folder does not exist; make one with `realm-bench world --out DIR`",
                       path=root)
    texts = vocab_lib.texts_from_world(root)
  else:
    texts = vocab_lib.texts_from_files([Path(name) for name in args.text])
  tokens = vocab_lib.learn_vocabulary(texts=texts, size=args.size, out=args.out)
  print(f"wrote {len(tokens)} wordpieces to {args.out}")
  return 0


def tasks(args, bindings) -> int:
  import gin  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import data, show  # pylint: disable=g-import-not-at-top
  parse_gin([show.DEFAULT_GIN_FILE, *args.gin_file], bindings, strict=True,
            **_gin_sources(args))
  if args.name is None:
    print(show.listing())
    return 0
  if args.num < 1:
    raise InputError(f"--num must be at least 1, got {args.num}")
  show.show(args.name, split=args.split, num=args.num,
            sequence_lengths=gin.get_configurable(data.SequenceLengths)())
  return 0


def score(args, bindings) -> int:
  from realm_bench import score as score_lib  # pylint: disable=g-import-not-at-top
  _no_bindings("score", bindings)
  summary = score_lib.score_files(references=args.references, predictions=args.predictions,
                                  regex=args.regex, per_example=args.per_example,
                                  answer_field=args.answer_field)
  print(score_lib.format_summary(summary))
  return 0


def _resources(args) -> dict:
  """--specs / --reported, when given (the loaders default to the shipped files)."""
  out = {}
  if args.specs is not None:
    out["specs_dir"] = args.specs
  if args.reported is not None:
    out["reported_path"] = args.reported
  return out


def convert(args, bindings) -> int:
  from realm_bench.convert import convert as convert_lib  # pylint: disable=g-import-not-at-top
  _no_bindings("convert", bindings)
  record = convert_lib.convert(sources=args.sources, fmt=args.format, out=args.out,
                               vocab=args.vocab, bert_config=args.bert_config)
  print(json.dumps({"run_dir": args.out, "subtrees": record.stats["subtrees"],
                    "index": bool(record.index_manifests),
                    "initialised": record.stats["initialised"],
                    "assumed": record.stats["assumed"]}))
  return 0


def tables(args, bindings) -> int:
  from realm_bench.reporting import render  # pylint: disable=g-import-not-at-top
  _no_bindings("tables", bindings)
  written = render.render_tables(runs_dir=args.runs, formats=render.parse_formats(args.format),
                                 out_dir=args.out, echo=True, **_resources(args))
  print(f"wrote {len(written)} file(s) under {args.out}", file=sys.stderr)
  return 0


def check(args, bindings) -> int:
  from realm_bench.reporting import check as check_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.reporting import check_output  # pylint: disable=g-import-not-at-top
  _no_bindings("check", bindings)
  code, verdicts = check_lib.check(runs_dir=args.runs, strict=args.strict,
                                   spec_ids=args.spec, require_records=True,
                                   **_resources(args))
  summary = check_lib.format_summary(verdicts, code=code, strict=args.strict)
  if args.format == "text":
    print(check_lib.format_verdicts(verdicts, verbose=args.verbose))
    print("\n" + summary)
  else:
    print(check_output.to_json(verdicts, code=code, strict=args.strict) if args.format == "json"
          else check_output.to_junit(verdicts, strict=args.strict), end="")
    print(summary, file=sys.stderr)
  return code


# name -> (help, argument builder, handler).
COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "quickstart": ("the whole pipeline on the synthetic world", _quickstart_args, quickstart),
    "reproduce": ("every row of Tables 1 and 2 and the staleness sweep, per seed, then the "
                  "tables and the check", _reproduce_args, reproduce),
    "sweep": ("the index-staleness sweep: one pre-training + fine-tuning per refresh interval",
              _sweep_args, sweep),
    "train": ("train a model (ICT, REALM pre-training or Open-QA fine-tuning) from gin files",
              _gin_args, train),
    "evaluate": ("exact match of a fine-tuned Open-QA run; writes a run record", _gin_args,
                 evaluate),
    "recall": ("zero-shot Recall@k of a retriever; writes a run record", _gin_args, recall),
    "index": ("embed a corpus with a run's document tower and build a MIPS index", _gin_args,
              index),
    "infer": ("write predictions of a fine-tuned run in the ORQA format", _gin_args, infer),
    "world": ("generate the synthetic world", _world_args, world),
    "vocab": ("learn a WordPiece vocabulary from a corpus", _vocab_args, vocab),
    "tasks": ("list the seqio tasks, or show examples of one", _tasks_args, tasks),
    "score": ("score a predictions file as the official Open-QA evaluation does", _score_args,
              score),
    "convert": ("write a run folder from released BERT / REALM / ORQA weights (Hugging Face or "
                "TF), for --gin.WARM_START and --gin.BERT_RUN", _convert_args, convert),
    "data": ("prepare real Open-QA data: `data resplit` makes ORQA's dev split, `data "
             "convert` reads DrQA / DPR / NQ-Open files, `data check` checks DATA_DIR",
             data_command.add_arguments, data_command.run),
    "blocks": ("cut a Wikipedia dump into corpus blocks and salient-span pre-training "
               "sentences (Apache Beam; the `beam` extra)", blocks_command.add_arguments,
               blocks_command.run),
    "tables": ("regenerate the leaderboard tables from run records", _tables_args, tables),
    "check": ("check run records against the reported numbers, and the specs' claims over "
              "seeds and questions (PASS / FAIL / INCONCLUSIVE)",
              _check_args, check),
}


class _HelpWithDefaults(argparse.HelpFormatter):
  """Every option's help ends with its default (or says it is required / off)."""

  def _get_help_string(self, action):
    text = action.help or ""
    if "default" in text or action.default is argparse.SUPPRESS or not action.option_strings:
      return text
    if action.required:
      return f"{text} (required)"
    if isinstance(action, argparse._StoreTrueAction):  # pylint: disable=protected-access
      return f"{text} (default: off)"
    if action.default in (None, []):
      return f"{text} (default: none)"
    return f"{text} (default: %(default)s)"


def version() -> str:
  from importlib import metadata  # pylint: disable=g-import-not-at-top
  try:
    return metadata.version("realm-bench")
  except metadata.PackageNotFoundError:
    return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(prog="realm-bench", description=__doc__.splitlines()[0],
                                   formatter_class=_HelpWithDefaults)
  parser.add_argument("--version", action="version", version=f"realm-bench {version()}")
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  for name, (help_text, add_arguments, _) in COMMANDS.items():
    p = sub.add_parser(name, help=help_text, description=help_text,
                       formatter_class=_HelpWithDefaults)
    add_arguments(p)
  return parser


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  try:
    rest, flag_bindings = split_gin_args(argv)
    args = build_parser().parse_args(rest)
    bindings = [*getattr(args, "gin_bindings", []), *flag_bindings]
    # Every record the command writes carries its argv as given (paths stay as the user
    # typed them), so the leaderboard can show the command behind each row.
    with recording_command(argv):
      return int(COMMANDS[args.command][2](args, bindings) or 0)
  except InputError as e:
    print(f"realm-bench {argv[0] if argv else ''}: error: {e.message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
  sys.exit(main())
