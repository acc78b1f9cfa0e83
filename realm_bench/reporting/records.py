"""The run record: the one file a run leaves for the aggregator (`record.json`).

Every run writes one: a training run (`kind` "train", with the refresh statistics of its
pipeline), an evaluation ("evaluate") and a zero-shot retrieval measurement ("recall"). A
record's `lineage` is the run_id of the run it started from (a training run's warm start, an
evaluation's checkpoint), so the aggregator joins a run's history from records instead of
anyone reconstructing it. Tables, plots and verdicts are computed from these records alone,
never from model code, so the schema is strict: a record that is truncated, mistyped or carries a non-finite number is
refused with the file and the field named, rather than quietly dropped from a table (a dropped
seed shifts a mean without anyone noticing).

A record's `command` is the `realm-bench` invocation that reproduces its run: the argv as
given when the run was started from the command line, or, for a stage a driver (quickstart,
sweep, reproduce) ran in-process, the equivalent `realm-bench train|evaluate|recall` call of
its gin files and bindings. The entry functions are called both ways and are gin-configured,
so the command reaches the record through a context variable (`recording_command`) rather
than as an argument, which gin would expose as a parameter. Records from before version 3
have none.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

from realm_bench.errors import InputError
from realm_bench.io_utils import atomic_write_json

SCHEMA_VERSION = 3
PROGRAM = "realm-bench"
RECORD_NAME = "record.json"
KINDS = ("train", "evaluate", "recall")

DATASETS = ("nq", "wq", "ct")
SPLITS = ("train", "dev", "test")
SCALES = ("paper", "synthetic")
RECALL_MATCHERS = ("string", "regex", "dpr")

_COMMAND: contextvars.ContextVar[str | None] = contextvars.ContextVar("command", default=None)
# Characters that keep their meaning inside double quotes (or start history expansion there).
_DOUBLE_QUOTE_UNSAFE = frozenset('"\\$`!')


_FLAG_WITH_VALUE = re.compile(r"(--[\w./-]+=)(.*)\Z", re.S)


def _quote(text: str) -> str:
  quoted = shlex.quote(text)
  if quoted != text and "'" in text and not _DOUBLE_QUOTE_UNSAFE & set(text):
    return f'"{text}"'
  return quoted


def shell_quote(arg: str) -> str:
  """shlex.quote for a POSIX shell, made readable for gin: in `--flag=VALUE` only the value is
  quoted, and a value whose only awkward characters are single quotes (gin's strings) is
  double-quoted, so `--gin.RUN_DIR="'runs/x'"` reads as a t5x user would type it instead of
  shlex's `'--gin.RUN_DIR='"'"'runs/x'"'"''`. Quoting a word of the result's shlex.split gives
  the word back, which is how the page re-wraps a command without changing it."""
  m = _FLAG_WITH_VALUE.match(arg)
  return m.group(1) + _quote(m.group(2)) if m else _quote(arg)


def command_line(args: Sequence[str]) -> str:
  """`realm-bench ARGS...`, each argument quoted for a POSIX shell."""
  return " ".join([PROGRAM, *map(shell_quote, args)])


@contextlib.contextmanager
def recording_command(args: Sequence[str]) -> Iterator[str]:
  """Records written inside carry `realm-bench ARGS...` as their command (innermost wins, so
  a driver's stage records its own command rather than the driver's)."""
  text = command_line(args)
  token = _COMMAND.set(text)
  try:
    yield text
  finally:
    _COMMAND.reset(token)


def current_command() -> str | None:
  return _COMMAND.get()


@dataclasses.dataclass(kw_only=True)
class RunRecord:
  """What ran and what it measured; field names are the contract with the trainer."""
  schema_version: int = SCHEMA_VERSION
  run_id: str
  kind: str
  experiment: str
  lineage: str | None = None
  # Table cells this run answers, as {"table", "row", "dataset", "metric"}. A record that lists
  # cells counts only for the metrics they name (so a fine-tuning run's recall@5 is not mixed
  # into Table 2's zero-shot recall@5); an empty list counts for every metric it carries.
  cells: list[dict] = dataclasses.field(default_factory=list)
  task: str
  dataset: str | None   # None: a pre-training or ICT run, which answers no Open-QA dataset
  split: str
  scale: str
  metrics: dict[str, float]
  num_examples: int
  gin_config: str
  git_commit: str
  hardware: dict = dataclasses.field(default_factory=dict)
  start_time: str
  end_time: str
  steps: int
  index_manifests: list[dict] = dataclasses.field(default_factory=list)
  params: dict = dataclasses.field(default_factory=dict)
  stats: dict = dataclasses.field(default_factory=dict)
  recall_matcher: str | None = None
  # Per-example outcomes of an evaluation, "1" right / "0" wrong (a hit / a miss for recall),
  # in the order of the split's file: what paired comparisons and bootstraps over questions
  # need. None when not recorded.
  outcomes: str | None = None
  # The `realm-bench` command that reproduces this run (see the module docstring); None when
  # it was not started through the command line or a driver's stage, or predates version 3.
  command: str | None = dataclasses.field(default_factory=current_command)


_FIELDS = {f.name: f for f in dataclasses.fields(RunRecord)}
_STR_FIELDS = ("run_id", "kind", "experiment", "task", "split", "scale", "gin_config",
               "git_commit", "start_time", "end_time")
_NONEMPTY = ("run_id", "experiment", "task")
_INT_FIELDS = ("schema_version", "num_examples", "steps")
_DICT_FIELDS = ("metrics", "hardware", "params", "stats")
_CHOICES = {"kind": KINDS, "split": SPLITS, "scale": SCALES}
_CELL_TYPES = {"table": str, "row": int, "dataset": str, "metric": str}


class _NonFinite:
  """Stands in for a NaN/Infinity literal while parsing, so the error can name its field."""

  def __init__(self, literal: str):
    self.literal = literal


def _is_int(x) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def _find_nonfinite(obj, where: str):
  """Returns (field path, literal) of the first NaN/Infinity inside obj, or None."""
  if isinstance(obj, _NonFinite):
    return where, obj.literal
  if isinstance(obj, float) and not math.isfinite(obj):
    return where, repr(obj)
  if isinstance(obj, dict):
    for key, value in obj.items():
      found = _find_nonfinite(value, f"{where}.{key}")
      if found:
        return found
  if isinstance(obj, (list, tuple)):
    for i, value in enumerate(obj):
      found = _find_nonfinite(value, f"{where}[{i}]")
      if found:
        return found
  return None


def _validate(obj: dict, path) -> None:
  """Raises InputError naming `path` and the first bad field of a record's JSON object."""
  def bad(field, message):
    raise InputError(message, path=path, field=field)

  for name in obj:
    if name not in _FIELDS:
      bad(name, f"unknown field (schema version {SCHEMA_VERSION} knows: "
                f"{', '.join(_FIELDS)})")
  for name in _FIELDS:
    if name not in obj:
      bad(name, "missing")
  for name in _FIELDS:
    found = _find_nonfinite(obj[name], name)
    if found:
      bad(found[0], f"{found[1]} is not a finite number")
  for name in _INT_FIELDS:
    if not _is_int(obj[name]):
      bad(name, f"expected an integer, got {type(obj[name]).__name__} {obj[name]!r}")
  if obj["schema_version"] != SCHEMA_VERSION:
    bad("schema_version", f"unsupported version {obj['schema_version']} (this reader knows "
                          f"{SCHEMA_VERSION})")
  for name in ("num_examples", "steps"):
    if obj[name] < 0:
      bad(name, f"must be >= 0, got {obj[name]}")
  for name in _STR_FIELDS:
    if not isinstance(obj[name], str):
      bad(name, f"expected a string, got {type(obj[name]).__name__} {obj[name]!r}")
  for name in _NONEMPTY:
    if not obj[name].strip():
      bad(name, "must not be empty")
  for name, choices in _CHOICES.items():
    if obj[name] not in choices:
      bad(name, f"expected one of {', '.join(choices)}, got {obj[name]!r}")
  if not (obj["dataset"] in DATASETS or obj["dataset"] is None and obj["kind"] == "train"):
    bad("dataset", f"expected one of {', '.join(DATASETS)}"
                   f"{' or null' if obj['kind'] == 'train' else ''}, got {obj['dataset']!r}")
  if obj["lineage"] is not None and not (isinstance(obj["lineage"], str) and obj["lineage"]):
    bad("lineage", f"expected a run_id or null, got {obj['lineage']!r}")
  for name in ("start_time", "end_time"):
    try:
      datetime.datetime.fromisoformat(obj[name])
    except ValueError:
      bad(name, f"expected an ISO 8601 time, got {obj[name]!r}")
  for name in _DICT_FIELDS:
    if not isinstance(obj[name], dict):
      bad(name, f"expected an object, got {type(obj[name]).__name__}")
  for key, value in obj["metrics"].items():
    if not _is_number(value):
      bad(f"metrics.{key}", f"expected a number, got {type(value).__name__} {value!r}")
  for name in ("cells", "index_manifests"):
    if not isinstance(obj[name], list) or not all(isinstance(x, dict) for x in obj[name]):
      bad(name, "expected a list of objects")
  for i, cell in enumerate(obj["cells"]):
    for key, kind in _CELL_TYPES.items():
      if key not in cell:
        bad(f"cells[{i}].{key}", "missing")
      if kind is int and not _is_int(cell[key]) or kind is str and not isinstance(cell[key], str):
        bad(f"cells[{i}].{key}", f"expected {kind.__name__}, got {cell[key]!r}")
  outcomes = obj["outcomes"]
  if outcomes is not None:
    if not isinstance(outcomes, str) or set(outcomes) - {"0", "1"}:
      bad("outcomes", "expected a string of 0s and 1s or null")
    if len(outcomes) != obj["num_examples"]:
      bad("outcomes", f"has {len(outcomes)} outcomes for {obj['num_examples']} examples")
  command = obj["command"]
  if command is not None and not (isinstance(command, str) and command.strip()):
    bad("command", f"expected a command line or null, got {command!r}")
  matcher = obj["recall_matcher"]
  if matcher is not None and matcher not in RECALL_MATCHERS:
    bad("recall_matcher", f"expected one of {', '.join(RECALL_MATCHERS)} or null, got "
                          f"{matcher!r}")
  if matcher is None and any(k.startswith("recall@") for k in obj["metrics"]):
    bad("recall_matcher", "required when metrics include a recall@k (which matcher counted "
                          "a hit changes the number)")


def write_record(run_dir, record: RunRecord) -> Path:
  """Validates and atomically writes `run_dir/record.json`; returns its path."""
  path = Path(run_dir) / RECORD_NAME
  obj = dataclasses.asdict(record)
  _validate(obj, path)
  atomic_write_json(path, obj)
  return path


def read_record(path) -> RunRecord:
  """Reads a `record.json` (or the one inside a run folder), refusing anything malformed."""
  path = Path(path)
  if path.is_dir():
    path = path / RECORD_NAME
  if not path.is_file():
    raise InputError("run record does not exist", path=path)
  try:
    text = path.read_text(encoding="utf-8")
  except (OSError, UnicodeDecodeError) as e:
    raise InputError(f"cannot read run record ({e})", path=path) from None
  try:
    obj = json.loads(text, parse_constant=_NonFinite)
  except json.JSONDecodeError as e:
    raise InputError(f"not valid JSON, truncated or corrupt ({e.msg}, column {e.colno})",
                     path=path, line=e.lineno) from None
  if not isinstance(obj, dict):
    raise InputError("expected a JSON object", path=path)
  if obj.get("schema_version") == 1:
    obj = _upgrade_v1(obj)
  if obj.get("schema_version") == 2:
    obj = _upgrade_v2(obj)
  _validate(obj, path)
  return RunRecord(**obj)


def _upgrade_v1(obj: dict) -> dict:
  """Version 1 records were written by evaluations only, with their training history's
  parameters and statistics copied in: they read as version 2 records without a lineage."""
  obj = dict(obj)
  metrics = obj.get("metrics")
  recall = isinstance(metrics, dict) and any(str(k).startswith("recall@") for k in metrics)
  obj.update(schema_version=2, kind="recall" if recall else "evaluate",
             lineage=None, outcomes=None)
  return obj


def _upgrade_v2(obj: dict) -> dict:
  """Version 2 records kept no command line: they read as version 3 records without one."""
  return {**obj, "schema_version": 3, "command": None}


def git_commit(repo=None) -> str:
  """HEAD of the checkout holding `repo` (default: this package), '-dirty' if it has changes."""
  cwd = Path(repo) if repo is not None else Path(__file__).resolve().parent
  try:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                          text=True, timeout=30, check=True).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True,
                            text=True, timeout=60, check=True).stdout
  except (OSError, subprocess.SubprocessError):
    return "unknown"
  return head + ("-dirty" if status.strip() else "")


def _memory_bytes() -> int | None:
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return None


def hardware_info() -> dict[str, Any]:
  """Where the run ran. Reads JAX's devices only if the caller already imported JAX, because
  importing it here would start a backend (and grab an accelerator) just to write a record."""
  info: dict[str, Any] = {
      "platform": platform.platform(),
      "processor": platform.processor() or platform.machine(),
      "cpu_count": os.cpu_count(),
      "memory_bytes": _memory_bytes(),
      "python": platform.python_version(),
  }
  jax = sys.modules.get("jax")
  if jax is not None:
    devices = jax.devices()
    info["jax_version"] = jax.__version__
    info["device_kind"] = devices[0].device_kind if devices else None
    info["device_count"] = len(devices)
  return info
