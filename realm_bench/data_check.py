"""`realm-bench data check DATA_DIR`: what a real-data folder holds, before hours of training.

The tasks stop at the first bad line of a split, and a split that is merely the wrong one
(DPR's nq-dev for ORQA's dev, a truncated download) does not fail at all: it changes the
numbers. The check reads every file the way the tasks do, keeps going past bad lines so all
of them are named (file:line:field), and compares each split's rows and distinct questions
with the sizes the paper used. A dev split is also checked against ORQA's question hash: every
ORQA dev question falls in the dev bucket and no ORQA train question does.
"""
from __future__ import annotations

import array
import dataclasses
from pathlib import Path

from realm_bench.errors import InputError
from realm_bench.io_utils import json_object, read_lines
from realm_bench.tasks import data, metrics, qa_files
from realm_bench.tasks import shards as shards_lib

# How many problems a file's report spells out; the count is always complete.
MAX_LISTED = 10
SPLITS = ("train", "dev", "test")
EXPECTED_BLOCKS = 13353718
MANIFEST = "corpus/manifest.json"   # what `realm-bench blocks` writes beside its shards
_TITLES = {"nq": "NQ-Open", "wq": "WebQuestions", "trec": "CuratedTREC"}


@dataclasses.dataclass
class FileReport:
  path: str                       # relative to DATA_DIR
  role: str                       # what reads it
  format: str | None = None
  rows: int | None = None
  distinct: int | None = None     # distinct questions (Open-QA) or ids (corpus)
  expected_rows: int | None = None
  expected_distinct: int | None = None
  problems: list[str] = dataclasses.field(default_factory=list)
  num_problems: int = 0
  notes: list[str] = dataclasses.field(default_factory=list)

  def problem(self, message: str) -> None:
    self.num_problems += 1
    if len(self.problems) < MAX_LISTED:
      self.problems.append(message)


def check(*, data_dir) -> dict:
  """Reports on every file under DATA_DIR; `problems` counts what would change a result."""
  root = Path(data_dir)
  if not root.is_dir():
    raise InputError("no such folder", path=root)
  reports, notes = [], []
  read = set()
  for folder in data.OPEN_QA_FOLDERS:
    present = {s: data.open_qa_file(root, folder, s) for s in SPLITS}
    if not any(present.values()):
      notes.append(f"{_TITLES[folder]}: no open_qa/{folder}/{{train,dev,test}}.jsonl|tsv "
                   "(`data resplit` or `data convert` makes them)")
      continue
    for split, path in present.items():
      if path is None:
        report = FileReport(f"open_qa/{folder}/{split}.jsonl", f"{_TITLES[folder]} {split}")
        report.problem("missing (nor .tsv): the benchmark's other splits are here")
        reports.append(report)
        continue
      read.add(path)
      reports.append(_open_qa(root, path, folder, split))
  corpus = next(([root / p] for p in (data.BLOCKS_JSONL, data.PASSAGES_TSV)
                 if (root / p).is_file()), None) or _shards(root, data.BLOCKS_JSONL, reports)
  if corpus is None:
    notes.append(f"no corpus: {data.BLOCKS_JSONL} (nor {data.PASSAGES_TSV}, nor shards)")
  elif corpus:
    read.update(corpus)
    reports.append(_corpus(root, corpus))
    if len(corpus) > 1 and (root / MANIFEST).is_file():
      read.add(root / MANIFEST)
      _against_manifest(reports[-1], root / MANIFEST)
  sentences = (([root / data.SENTENCES_JSONL] if (root / data.SENTENCES_JSONL).is_file()
                else None) or _shards(root, data.SENTENCES_JSONL, reports))
  if sentences is None:
    notes.append(f"no pre-training text: {data.SENTENCES_JSONL} (REALM pre-training needs it)")
  elif sentences:
    read.update(sentences)
    reports.append(_sentences(root, sentences))
  for path in sorted(p for p in root.rglob("*") if p.is_file() and p not in read
                     and not any(part.startswith(".") for part in p.relative_to(root).parts)):
    reports.append(_unread(root, path))
  return {"data_dir": str(root), "files": [dataclasses.asdict(r) for r in reports],
          "notes": notes, "problems": sum(r.num_problems for r in reports)}


def _relative(root: Path, path: Path) -> str:
  return str(path.relative_to(root))


def _shards(root: Path, relpath: str, reports: list) -> list[Path] | None:
  """`realm-bench blocks`' shards of `relpath`: None when there are none, [] (and a problem
  reported) when the set is incomplete."""
  try:
    return shards_lib.shard_files(root, relpath) or None
  except InputError as e:
    report = FileReport(relpath.replace(".jsonl", "-*-of-*.jsonl"), "shards")
    report.problem(e.message)
    reports.append(report)
    return []


def _against_manifest(report: FileReport, path: Path) -> None:
  """The shards' blocks against the count `realm-bench blocks` wrote when it finished."""
  try:
    expected = json_object(path.read_text(encoding="utf-8"), path=path, line=1,
                           required=("blocks",))["blocks"]
  except (InputError, UnicodeDecodeError) as e:
    report.problem(getattr(e, "message", f"{path}: not UTF-8 JSON"))
    return
  if expected != report.rows:
    report.problem(f"{report.rows:,} blocks in the shards; {path.name} says {expected:,}")
  else:
    report.notes.append(f"{expected:,} blocks, as {path.name} says")


def _label(root: Path, paths: list[Path]) -> str:
  """One file's path, or a shard set's pattern and count."""
  if len(paths) == 1:
    return _relative(root, paths[0])
  first = _relative(root, paths[0])
  return f"{first.split('-00000-of-')[0]}-*-of-{len(paths):05d}.jsonl ({len(paths)} shards)"


def _count_questions(report: FileReport, path: Path, **kwargs) -> list[qa_files.QARow]:
  rows = []
  try:
    report.format = qa_files.sniff_format(path)
    for row in qa_files.iter_checked(path, fmt=report.format, **kwargs):
      if isinstance(row, InputError):
        report.problem(row.message)
      else:
        rows.append(row)
  except InputError as e:   # the file as a whole: not UTF-8, not a JSON array, ...
    report.problem(e.message)
  report.rows = len(rows)
  report.distinct = len({r.question for r in rows})
  return rows


def _open_qa(root: Path, path: Path, folder: str, split: str) -> FileReport:
  report = FileReport(_relative(root, path), f"{_TITLES[folder]} {split}",
                      expected_rows=data.EXPECTED_ROWS.get((folder, split)),
                      expected_distinct=data.EXPECTED_QUESTIONS.get((folder, split)))
  rows = _count_questions(report, path)
  if report.format not in (None, "jsonl", "dpr-qa"):
    report.problem(f"the tasks read JSON lines or question<TAB>answers here, not "
                   f"{report.format}: convert it with `realm-bench data convert`")
    return report
  if folder == "trec":
    for row in rows:
      for i, pattern in enumerate(row.answers):
        if not metrics.pattern_compiles(pattern):
          report.problem(f"{path}:{row.line}: field 'answer[{i}]': the regular expression "
                         f"{pattern!r} does not compile, so it never matches")
  if report.expected_rows is not None and report.rows != report.expected_rows:
    report.problem(f"{report.rows:,} rows; the paper's split has {report.expected_rows:,}")
  if (report.expected_distinct is not None and report.distinct != report.expected_distinct
      and report.rows == report.expected_rows):   # (a cut file is reported once, above)
    report.problem(f"{report.distinct:,} distinct questions; the paper's split has "
                   f"{report.expected_distinct:,}")
  if split in ("train", "dev") and rows:
    _check_hash_split(report, rows, split)
  return report


def _check_hash_split(report: FileReport, rows: list[qa_files.QARow], split: str) -> None:
  """ORQA's dev is exactly the train questions in hash bucket 0 (create_data_splits.py)."""
  from realm_bench import data_splits  # pylint: disable=g-import-not-at-top
  in_dev = [row for row, b in zip(rows, data_splits.dev_buckets([r.question for r in rows]))
            if b == 0]
  if split == "dev" and len(in_dev) != len(rows):
    report.problem(f"only {len(in_dev):,} of {len(rows):,} questions are in ORQA's dev hash "
                   "bucket: this is not ORQA's dev split (DPR's nq-dev is not either); make it "
                   "from the train file with `realm-bench data resplit`")
  if split == "train" and in_dev:
    report.problem(f"{len(in_dev):,} questions are in ORQA's dev hash bucket (first: line "
                   f"{in_dev[0].line}): ORQA's train split holds none; make it with "
                   "`realm-bench data resplit`")


def _corpus(root: Path, paths: list[Path]) -> FileReport:
  report = FileReport(_label(root, paths), "corpus")
  ids = array.array("q")
  path = paths[0]
  if path.suffix == ".tsv":
    report.format = "dpr-passages"
    report.notes.append("DPR's 100-word passages are a different segmentation from the "
                        "paper's 288-wordpiece blocks")
    try:
      for block in data.iter_passages_tsv(path):
        ids.append(block.id)
    except InputError as e:   # the csv reader cannot resume after a bad row
      report.problem(e.message + " (the check stops reading this file here)")
  else:
    report.format, report.expected_rows = "blocks-jsonl", EXPECTED_BLOCKS
    for path in paths:
      for lineno, line in read_lines(path):
        if not line.strip():
          continue
        try:
          ids.append(data.block_of(json_object(line, path=path, line=lineno,
                                               required=data.BLOCK_FIELDS), path, lineno).id)
        except InputError as e:
          report.problem(e.message)
  report.rows = len(ids)
  report.distinct = _distinct(ids)
  if report.distinct != report.rows:
    report.problem(f"{report.rows - report.distinct:,} block ids repeat: a retrieved id "
                   "would name two blocks")
  if report.expected_rows is not None and report.rows != report.expected_rows:
    report.problem(f"{report.rows:,} blocks; the paper's corpus (Wikipedia 2018-12-20) has "
                   f"{report.expected_rows:,}")
  return report


def _distinct(ids: array.array) -> int:
  import numpy as np  # pylint: disable=g-import-not-at-top
  return int(np.unique(np.frombuffer(ids, dtype=np.int64)).size) if ids else 0


def _sentences(root: Path, paths: list[Path]) -> FileReport:
  report = FileReport(_label(root, paths), "pre-training text", format="sentences-jsonl")
  rows = with_spans = 0
  for path, (lineno, line) in ((p, row) for p in paths for row in read_lines(p)):
    if not line.strip():
      continue
    try:
      sentence = data.sentence_of(json_object(line, path=path, line=lineno,
                                              required=data.SENTENCE_FIELDS), path, lineno)
    except InputError as e:
      report.problem(e.message)
      continue
    rows += 1
    with_spans += bool(sentence.starts)
  report.rows = rows
  report.notes.append(f"{with_spans:,} sentences have a salient span (the others are skipped "
                      "by salient-span masking)")
  return report


def _unread(root: Path, path: Path) -> FileReport:
  report = FileReport(_relative(root, path), "not read by any task")
  if path.suffix == ".tsv" and path.with_suffix(".jsonl").is_file():
    report.notes.append(f"the tasks read {path.with_suffix('.jsonl').name} instead")
  try:
    qa_files.sniff_format(path)
  except InputError:
    report.notes.append("not a question file the converters know")
    return report
  _count_questions(report, path)
  if report.num_problems:   # no task reads it, so it changes no result: a note, not a problem
    report.notes.append(f"{report.num_problems} bad row(s) would stop a conversion; first: "
                        f"{report.problems[0]}")
    report.problems, report.num_problems = [], 0
  report.notes.append("questions: `realm-bench data convert` or `data resplit` puts them where "
                      "the tasks read them (open_qa/{nq,wq,trec}/{train,dev,test}.jsonl)")
  return report


def format_report(report: dict) -> str:
  """One block per file: its role, format, counts against the paper's, then its problems."""
  lines = [f"data check of {report['data_dir']}"]
  for f in report["files"]:
    counts = []
    if f["rows"] is not None:
      counts.append(f"{f['rows']:,} rows" + (f" (paper: {f['expected_rows']:,})"
                                              if f["expected_rows"] is not None else ""))
    if f["distinct"] is not None:
      noun = "ids" if f["role"] == "corpus" else "questions"
      counts.append(f"{f['distinct']:,} distinct {noun}" + (
          f" (paper: {f['expected_distinct']:,})" if f["expected_distinct"] is not None
          else ""))
    verdict = "ok" if not f["num_problems"] else f"{f['num_problems']} problem(s)"
    lines.append(f"{f['path']}: {f['role']}; {f['format'] or 'format unknown'}; "
                 f"{', '.join(counts) or 'not read'}; {verdict}")
    lines += [f"  problem: {p}" for p in f["problems"]]
    if f["num_problems"] > len(f["problems"]):
      lines.append(f"  ... and {f['num_problems'] - len(f['problems'])} more")
    lines += [f"  note: {n}" for n in f["notes"]]
  lines += [f"note: {n}" for n in report["notes"]]
  lines.append(f"{report['problems']} problem(s) in {len(report['files'])} file(s)")
  return "\n".join(lines)
