"""Atomic file writes and strict JSONL reading.

Results, records, tables and indexes are written under a temporary name in the same folder
and renamed, so a killed process leaves either the old file or the new one, never half of one.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from realm_bench.errors import InputError


@contextlib.contextmanager
def atomic_path(path) -> Iterator[Path]:
  """Yields a temporary path beside `path`; renames it onto `path` only on success."""
  path = Path(path)
  path.parent.mkdir(parents=True, exist_ok=True)
  fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
  os.close(fd)
  tmp = Path(tmp)
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are meant to be shared
  try:
    yield tmp
    os.replace(tmp, path)
  finally:
    if tmp.exists():
      tmp.unlink()


def atomic_write_text(path, text: str) -> None:
  with atomic_path(path) as tmp:
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
      f.write(text)
      f.flush()
      os.fsync(f.fileno())


def atomic_write_bytes(path, data: bytes) -> None:
  with atomic_path(path) as tmp:
    with open(tmp, "wb") as f:
      f.write(data)
      f.flush()
      os.fsync(f.fileno())


def _reject_nan(value):
  raise ValueError(f"non-finite number {value!r} is not valid JSON")


def dumps(obj: Any, **kwargs) -> str:
  """json.dumps that refuses NaN/Infinity instead of writing invalid JSON."""
  return json.dumps(obj, allow_nan=False, ensure_ascii=False, **kwargs)


def atomic_write_json(path, obj: Any) -> None:
  atomic_write_text(path, dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_write_jsonl(path, rows) -> None:
  atomic_write_text(path, "".join(dumps(r, sort_keys=True) + "\n" for r in rows))


def _strict_constant(name):
  raise ValueError(f"{name} is not allowed")


def read_lines(path) -> Iterator[tuple[int, str]]:
  """Yields (line_number, line without its newline) of a UTF-8 text file, decoded line by line
  so that a byte that is not UTF-8 is an InputError naming its line (a raw UnicodeDecodeError
  names only a byte offset into a file that may hold 13 million lines)."""
  path = Path(path)
  if not path.exists():
    raise InputError("file does not exist", path=path)
  if not path.is_file():
    raise InputError("not a regular file", path=path)
  with open(path, "rb") as f:
    for lineno, raw in enumerate(f, start=1):
      try:
        text = raw.decode("utf-8")
      except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: byte {raw[e.start:e.start + 1]!r} at column "
                         f"{e.start + 1} ({e.reason}); re-encode the file as UTF-8",
                         path=path, line=lineno) from None
      if lineno == 1:
        text = text.lstrip("\ufeff")   # a byte-order mark some editors write
      yield lineno, text.rstrip("\r\n")


def read_jsonl(path, *, required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict]]:
  """Yields (line_number, object); bad lines raise InputError naming file, line and field."""
  path = Path(path)
  if not path.exists():
    raise InputError("file does not exist", path=path)
  for lineno, raw in read_lines(path):
    if raw.strip():
      yield lineno, json_object(raw, path=path, line=lineno, required=required)


def json_object(raw: str, *, path, line: int, required: tuple[str, ...] = ()) -> dict:
  """One JSON-lines line as an object; a bad one raises InputError naming file, line and
  field. Apart from read_jsonl so that a checker can go on past a bad line."""
  try:
    obj = json.loads(raw, parse_constant=_strict_constant)
  except ValueError as e:
    raise InputError(f"not valid JSON ({e})", path=path, line=line) from None
  if not isinstance(obj, dict):
    raise InputError("expected a JSON object", path=path, line=line)
  for key in required:
    if key not in obj:
      raise InputError("missing", path=path, line=line, field=key)
  return obj


def sha256_file(path) -> str:
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


def is_finite_number(x) -> bool:
  return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
