"""Masked-language-model pre-training tasks over `pretrain/sentences.jsonl` and the corpus.

`realm_bench.synthetic.pretrain` reads the synthetic world (WORLD_DIR), whose generator
annotates every entity and date it writes. `realm_bench.pretrain` reads DATA_DIR in the same
format; at paper scale the spans come from a named-entity and date tagger the user runs (REALM
used a BERT-based NER model and a date regular expression over Wikipedia sentences).

`realm_bench[.synthetic].pretrain_blocks` masks the knowledge corpus's block bodies instead.
Blocks carry no span annotations, so they are masked BERT-style ("random_token") whatever
MASKING says (salient-span masking would drop every block); `block_id` is the block's own id, so
a model can keep a block from retrieving itself. `realm_bench[.synthetic].pretrain_mix` mixes
the two at equal rates (seqio.MixtureRegistry), for a pre-training run over both corpora.

Examples: `inputs` ([CLS] masked text [SEP], int32, at most QUERY_LEN), `targets` (same
length: the original id where masked, 0 elsewhere) and `block_id` (int32, the corpus block the
text came from or -1, so the model can exclude it from retrieval). The sentences' masking is
chosen by `mask_tokens.strategy` (macro MASKING); see `preprocessors`.
"""
from __future__ import annotations

import functools

import seqio

from realm_bench.tasks import data
from realm_bench.tasks import preprocessors
from realm_bench.tf_runtime import tf  # TensorFlow kept off the accelerators

BLOCK_MASKING = "random_token"


def _prefix(kind: str) -> str:
  return f"realm_bench.{'synthetic.' if kind == 'world' else ''}"


def task_name(kind: str) -> str:
  return f"{_prefix(kind)}pretrain"


def blocks_task_name(kind: str) -> str:
  return f"{_prefix(kind)}pretrain_blocks"


def mixture_name(kind: str) -> str:
  return f"{_prefix(kind)}pretrain_mix"


def _output_features() -> dict[str, seqio.Feature]:
  return {
      "inputs": preprocessors.token_feature(),
      "targets": preprocessors.token_feature(),
      "block_id": preprocessors.int_feature(rank=0),
  }


def make_task(kind: str) -> seqio.Task:
  source = data.RootedSource(
      kind=kind, files=data.SENTENCES_JSONL,
      make=lambda root, split: data.sentences_dataset(root, kind=kind), splits=("train",))
  return seqio.Task(task_name(kind), source=source, output_features=_output_features(),
                    preprocessors=[preprocessors.mask_tokens])


def _blocks_as_text(root, kind: str) -> tf.data.Dataset:
  """Corpus blocks shaped like pre-training sentences: the body, no spans, its own id."""
  no_spans = tf.zeros([0], tf.int32)
  return data.corpus_dataset(root, kind=kind).map(
      lambda b: {"text": b["body"], "span_starts": no_spans, "span_ends": no_spans,
                 "block_id": b["id"]})


def make_blocks_task(kind: str) -> seqio.Task:
  source = data.RootedSource(
      kind=kind, files=f"{data.BLOCKS_JSONL}|{data.PASSAGES_TSV}",
      make=lambda root, split: _blocks_as_text(root, kind), splits=("train",))
  return seqio.Task(
      blocks_task_name(kind), source=source, output_features=_output_features(),
      preprocessors=[functools.partial(preprocessors.mask_tokens, strategy=BLOCK_MASKING)])


def make_tasks() -> list[seqio.Task]:
  return [make(kind) for kind in ("world", "data") for make in (make_task, make_blocks_task)]


def make_mixtures() -> list[seqio.Mixture]:
  """Sentences and blocks at equal rates; call after the tasks are registered."""
  return [seqio.Mixture(mixture_name(kind), [task_name(kind), blocks_task_name(kind)],
                        default_rate=1.0) for kind in ("world", "data")]
