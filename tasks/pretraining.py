"""Masked-language-model pre-training tasks over `pretrain/sentences.jsonl`.

`realm_bench.synthetic.pretrain` reads the synthetic world (WORLD_DIR), whose generator
annotates every entity and date it writes. `realm_bench.pretrain` reads DATA_DIR in the same
format; at paper scale the spans come from a named-entity and date tagger the user runs (REALM
used a BERT-based NER model and a date regular expression over Wikipedia sentences).

Examples: `inputs` ([CLS] masked sentence [SEP], int32, at most QUERY_LEN), `targets` (same
length: the original id where masked, 0 elsewhere) and `block_id` (int32, the corpus block the
sentence came from or -1, so the model can exclude it from retrieval). The masking is chosen by
`mask_tokens.strategy` (macro MASKING); see `preprocessors`.
"""
from __future__ import annotations

import seqio

from realm_bench.tasks import data
from realm_bench.tasks import preprocessors


def task_name(kind: str) -> str:
  return f"realm_bench.{'synthetic.' if kind == 'world' else ''}pretrain"


def make_task(kind: str) -> seqio.Task:
  source = data.RootedSource(
      kind=kind, files=data.SENTENCES_JSONL,
      make=lambda root, split: data.sentences_dataset(root, kind=kind), splits=("train",))
  return seqio.Task(
      task_name(kind),
      source=source,
      output_features={
          "inputs": preprocessors.token_feature(),
          "targets": preprocessors.token_feature(),
          "block_id": preprocessors.int_feature(rank=0),
      },
      preprocessors=[preprocessors.mask_tokens])


def make_tasks() -> list[seqio.Task]:
  return [make_task("world"), make_task("data")]
