"""Sharded data files, `NAME-SSSSS-of-NNNNN.jsonl`, as `realm-bench blocks` writes them.

A corpus is read by row number (the index maps rows back to blocks), so a set with a shard
missing is refused rather than read as a smaller corpus whose later rows have moved.
"""
from __future__ import annotations

import re
from pathlib import Path

from realm_bench.errors import InputError


def shard_files(root: Path, relpath: str) -> list[Path]:
  """The complete set of shards `NAME-SSSSS-of-NNNNN.jsonl` of `relpath` (NAME.jsonl), in
  shard order; [] when there are none."""
  folder, stem = (root / relpath).parent, Path(relpath).stem
  found = sorted(folder.glob(f"{stem}-[0-9]*-of-[0-9]*.jsonl")) if folder.is_dir() else []
  if not found:
    return []
  pattern = re.compile(rf"{re.escape(stem)}-(\d{{5}})-of-(\d{{5}})\.jsonl")
  matches = [pattern.fullmatch(p.name) for p in found]
  bad = next((p for p, m in zip(found, matches) if m is None), None)
  if bad is not None:
    raise InputError(f"a shard name must read {stem}-SSSSS-of-NNNNN.jsonl", path=bad)
  totals = {int(m.group(2)) for m in matches}
  if len(totals) != 1:
    raise InputError(f"shards of different sets ({', '.join(map(str, sorted(totals)))} "
                     "shards) side by side", path=folder)
  total = totals.pop()
  present = {int(m.group(1)) for m in matches}
  missing = sorted(set(range(total)) - present)
  if missing or len(present) != total:
    first = f"{stem}-{missing[0]:05d}-of-{total:05d}.jsonl" if missing else "?"
    raise InputError(f"{len(missing)} of {total} shards missing (the first: {first}); an "
                     "unfinished `realm-bench blocks` run?", path=folder)
  return [folder / f"{stem}-{i:05d}-of-{total:05d}.jsonl" for i in range(total)]
