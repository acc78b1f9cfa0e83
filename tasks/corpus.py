"""The knowledge corpus as a seqio task: one example per block, in file order.

File order matters: the index maps row numbers back to blocks, and an embedding job restarted
halfway must see the same blocks in the same places, so this task is read with
`shuffle=False` and has a single `train` split.

Examples: `id` (int32), `title`, `body` (strings), `inputs` ([CLS] title [SEP] body [SEP],
int32, at most BLOCK_LEN, body cut first), `title_ids`, `body_ids` (the kept wordpieces without
specials) and `body_starts`/`body_ends` (int32 character offsets of each kept body wordpiece
into `body`, so a predicted span can be cut out of the original text).
"""
from __future__ import annotations

import seqio

from realm_bench.tasks import data
from realm_bench.tasks import preprocessors


def task_name(kind: str) -> str:
  return f"realm_bench.{'synthetic.' if kind == 'world' else ''}corpus"


def make_task(kind: str) -> seqio.Task:
  source = data.RootedSource(
      kind=kind, files=f"{data.BLOCKS_JSONL}|{data.PASSAGES_TSV}",
      make=lambda root, split: data.corpus_dataset(root, kind=kind), splits=("train",))
  return seqio.Task(
      task_name(kind),
      source=source,
      output_features={
          "inputs": preprocessors.token_feature(),
          "title_ids": preprocessors.token_feature(),
          "body_ids": preprocessors.token_feature(),
          "id": preprocessors.int_feature(rank=0),
          "body_starts": preprocessors.int_feature(rank=1),
          "body_ends": preprocessors.int_feature(rank=1),
      },
      preprocessors=[preprocessors.tokenize_block],
      # Never reorder blocks: shuffling is refused rather than silently applied.
      shuffle_buffer_size=None)


def make_tasks() -> list[seqio.Task]:
  return [make_task("world"), make_task("data")]


TASK_NAMES = (task_name("world"), task_name("data"))
