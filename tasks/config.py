"""The paths `realm_bench.tasks.configure(...)` set, where the gin-free readers look.

The harness names its folders with gin (WORLD_DIR, DATA_DIR, VOCAB_PATH), but a seqio program
of someone else's should not need gin to read a task. `configure` (in `api`) stores the three
paths here; `data.world_dir()`, `data.data_dir()` and `vocab.get_vocabulary()` fall back to them
when gin binds nothing (a gin binding, when given, wins, so the harness's runs read exactly what
their config names). Stdlib only and importing nothing above it, so every layer may read it.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

API = "realm_bench.tasks.configure"


@dataclasses.dataclass(frozen=True)
class Paths:
  world_dir: Path | None = None
  data_dir: Path | None = None
  vocab_path: Path | None = None


_current = Paths()


def current() -> Paths:
  """The paths `configure` set last (all None before any call)."""
  return _current


def set_paths(paths: Paths) -> None:
  global _current
  _current = paths
