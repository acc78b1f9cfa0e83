"""Registers every realm-bench seqio task; `import realm_bench.tasks.registry` is all it takes.

Registering replaces a task of the same name, so importing this module again (a reload, a
notebook re-run, gin files that import it) never fails on "already registered".

  realm_bench.{nq_open,web_questions,curated_trec}              real Open-QA      (DATA_DIR)
  realm_bench.synthetic.{nq_open,web_questions,curated_trec}    synthetic twins   (WORLD_DIR)
  realm_bench.pretrain, realm_bench.synthetic.pretrain           masked sentences
  realm_bench.pretrain_blocks, realm_bench.synthetic.pretrain_blocks   masked corpus blocks
  realm_bench.corpus, realm_bench.synthetic.corpus               knowledge blocks
and the mixtures (seqio.MixtureRegistry) realm_bench[.synthetic].pretrain_mix: sentences and
blocks.
"""
from __future__ import annotations

import seqio

from realm_bench.tasks import corpus
from realm_bench.tasks import open_qa
from realm_bench.tasks import pretraining

PREFIX = "realm_bench."


def register_all() -> list[str]:
  names = []
  for task in (*open_qa.make_tasks(), *pretraining.make_tasks(), *corpus.make_tasks()):
    seqio.TaskRegistry.remove(task.name)
    seqio.TaskRegistry.add_provider(task.name, task)
    names.append(task.name)
  for mixture in pretraining.make_mixtures():
    seqio.MixtureRegistry.remove(mixture.name)
    seqio.MixtureRegistry.add_provider(mixture.name, mixture)
  return names


def task_names() -> list[str]:
  return sorted(n for n in seqio.TaskRegistry.names() if n.startswith(PREFIX))


def mixture_names() -> list[str]:
  return sorted(n for n in seqio.MixtureRegistry.names() if n.startswith(PREFIX))


TASK_NAMES = tuple(register_all())
