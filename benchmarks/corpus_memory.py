"""Resident memory of REALM pre-training's candidate lookup: the in-memory corpus vs the
memory-mapped token file (pipelines/token_file.py).

Each way runs in a fresh process over the same synthetic blocks (random wordpieces, the
paper's block length 288) and reads the rows of `--batches` pre-training batches of K-1
candidates through `batching.pretrain_batch`; the process's resident set is read after
loading and after the batches, above its baseline after its imports, split into anonymous
memory (RssAnon) and file-backed pages (RssFile: a memmap's, reclaimable page cache). "memory"
holds what `pipelines.base.load_corpus` holds of the corpus (the padded [N, L] array and the
per-block body arrays; its titles, strings and offsets, not needed for candidates, are left
out, so it is a lower bound); "memmap" opens the token file, written once beforehand.

  python benchmarks/corpus_memory.py [--blocks 200000] [--batches 200]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

BLOCK_LEN = 288
MIB = 1 << 20


def _rss() -> np.ndarray:
  """(anonymous, file-backed) resident bytes: file pages of a memmap are the page cache's,
  dropped under pressure; anonymous ones are what the process really holds."""
  fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
  return np.array([int(fields[k].split()[0]) * 1024 for k in ("RssAnon", "RssFile")])


def synthetic_rows(n: int, seed: int = 0):
  """`token_file.BlockRow`s of random wordpieces, each body's text one word per piece."""
  from realm_bench.pipelines import token_file  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  for i in range(n):
    title = int(rng.integers(1, 12))
    body = int(rng.integers(100, BLOCK_LEN - 3 - title + 1))
    ids = rng.integers(5, 30000, title + body, dtype=np.int32)
    words = [f"w{x}" for x in ids[title:]]
    ends = np.cumsum([len(w) + 1 for w in words]) - 1
    yield token_file.BlockRow(
        i, np.concatenate([[101], ids[:title], [102], ids[title:], [102]]).astype(np.int32),
        2 + title, body, f"title {i}", " ".join(words), ends - [len(w) for w in words], ends)


def _measure(way: str, folder: Path, blocks: int, batches: int) -> None:
  from realm_bench.pipelines import batching, token_file  # pylint: disable=g-import-not-at-top
  base = _rss()
  if way == "memory":
    rows = list(synthetic_rows(blocks))
    corpus = batching.Corpus(
        ids=np.array([r.id for r in rows], np.int64), titles=[], bodies=[],
        doc_inputs=batching.pad_rows([r.inputs for r in rows], BLOCK_LEN), title_ids=[],
        body_ids=[r.inputs[r.body_start:r.body_start + r.body_len].copy() for r in rows],
        body_starts=[], body_ends=[])
    del rows
  else:
    corpus = token_file.open_corpus(folder, {"bench": blocks}, verify=False)
  loaded = _rss()
  rng = np.random.default_rng(1)
  specials = batching.Specials(cls=101, sep=102, mask=103)
  examples = [{"inputs": np.arange(5, 101), "targets": np.zeros(96, np.int64)}] * 16
  for _ in range(batches):
    cands = rng.integers(0, blocks, (16, 7))
    batching.pretrain_batch(examples, cands, corpus, specials, query_len=96, max_masks=10,
                            joint_len=96 + BLOCK_LEN)
  print(" ".join(f"{v / MIB:.1f}" for v in [*(loaded - base), *(_rss() - base)]))


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--blocks", type=int, default=200_000)
  parser.add_argument("--batches", type=int, default=200)
  parser.add_argument("--measure", choices=["memory", "memmap"])
  parser.add_argument("--folder", type=Path)
  args = parser.parse_args()
  if args.measure:
    _measure(args.measure, args.folder, args.blocks, args.batches)
    return
  from realm_bench.pipelines import token_file  # pylint: disable=g-import-not-at-top
  with tempfile.TemporaryDirectory() as tmp:
    token_file.write(tmp, synthetic_rows(args.blocks), block_len=BLOCK_LEN,
                     fingerprint={"bench": args.blocks})
    size = sum(f.stat().st_size for f in Path(tmp).iterdir()) / MIB
    print(f"{args.blocks:,} blocks x {BLOCK_LEN}: token files {size:.0f} MiB; "
          f"{args.batches} batches of 16 x 7 candidates")
    print("| corpus | after load: anon / file MiB | after the batches: anon / file MiB |\n"
          "|---|---|---|")
    for way in ("memory", "memmap"):
      out = subprocess.run([sys.executable, __file__, "--measure", way, "--folder", tmp,
                            "--blocks", str(args.blocks), "--batches", str(args.batches)],
                           check=True, capture_output=True, text=True).stdout.split()
      print(f"| {way} | {out[0]} / {out[1]} | {out[2]} / {out[3]} |")


if __name__ == "__main__":
  main()
