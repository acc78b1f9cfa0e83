"""The rows of Tables 1 and 2 as data: which pre-training and fine-tuning make each one.

A row is named by its records' `experiment`, the name `results/specs/table{1,2}.yaml` look up,
and made by the gin overlays of `gin/experiments/` on the ordinary run files, so a row run by
`realm-bench reproduce` is the same run a user gets from `realm-bench train --gin_file=...`.
Kept apart from the driver so a test can hold the rows against the specs without running
anything.
"""
from __future__ import annotations

import dataclasses

# Where a row's weights come from: the ICT run, or one of the REALM pre-trainings below.
ICT = "ict"


@dataclasses.dataclass(frozen=True)
class Pretraining:
  """A REALM pre-training variant (`runs/pretrain.gin` + its overlay), from ICT and BERT."""
  name: str                   # its experiment; runs `NAME_pretrain`
  overlay: str
  stale: bool = False         # refreshed ReproduceConfig.stale_factor times less often


@dataclasses.dataclass(frozen=True)
class System:
  """A fine-tuned row: `runs/finetune.gin` + `overlay`, warm-started from `retriever` (the
  WARM_START macro; None: nothing, as for BM25 and closed-book) and, where the overlay takes
  one, the REALM pre-training whose encoder becomes the reader (`reader`, REALM_RUN)."""
  experiment: str
  overlay: str
  retriever: str | None
  reader: str | None = None
  # Whose zero-shot Recall@5 is this row's Table 2 Recall@5 (None: not a Table 2 row).
  recall_of: str | None = None
  table1: bool = False        # evaluated on every twin's test split (Table 1)
  not_on: tuple[str, ...] = ()   # Table 1 twins the system cannot train on
  table2: bool = False        # evaluated on the NQ twin's dev split (Table 2)
  # The overlays evaluation needs besides runs/evaluate.gin (its pipeline or retriever).
  eval_overlays: tuple[str, ...] = ()


PRETRAININGS = (
    Pretraining("realm", "experiments/realm.gin"),
    Pretraining("realm_random_token_mask", "experiments/realm_random_token_mask.gin"),
    Pretraining("realm_random_span_mask", "experiments/realm_random_span_mask.gin"),
    Pretraining("realm_stale_30x", "experiments/realm_stale_30x.gin", stale=True),
)

SYSTEMS = (
    System("realm", "experiments/realm.gin", retriever="realm", recall_of="realm",
           table1=True, table2=True),
    System("orqa", "experiments/orqa.gin", retriever=ICT, recall_of=ICT, table1=True,
           table2=True),
    System("bm25_reader", "experiments/bm25_reader.gin", retriever=None, table1=True,
           eval_overlays=("experiments/bm25_reader.gin",)),
    # Closed-book training fills in answer strings, and CuratedTREC's answers are patterns;
    # the paper's closed-book (T5) rows have no CT number either.
    System("closed_book", "experiments/closed_book.gin", retriever=None, table1=True,
           not_on=("ct",), eval_overlays=("experiments/closed_book.gin",)),
    System("realm_retriever_baseline_encoder",
           "experiments/realm_retriever_baseline_encoder.gin", retriever="realm",
           recall_of="realm", table2=True),
    System("baseline_retriever_realm_encoder",
           "experiments/baseline_retriever_realm_encoder.gin", retriever=ICT, reader="realm",
           recall_of=ICT, table2=True),
    System("realm_random_token_mask", "experiments/realm_random_token_mask.gin",
           retriever="realm_random_token_mask", recall_of="realm_random_token_mask",
           table2=True),
    System("realm_random_span_mask", "experiments/realm_random_span_mask.gin",
           retriever="realm_random_span_mask", recall_of="realm_random_span_mask",
           table2=True),
    System("realm_stale_30x", "experiments/realm_stale_30x.gin", retriever="realm_stale_30x",
           recall_of="realm_stale_30x", table2=True),
)


def finetune_name(system: System, dataset: str) -> str:
  """The NQ twin's runs keep the quickstart's names (`realm_finetune`); the others say theirs."""
  return f"{system.experiment}_finetune" if dataset == "nq" else \
      f"{system.experiment}_{dataset}_finetune"


def eval_name(system: System, dataset: str, split: str) -> str:
  prefix = system.experiment if dataset == "nq" else f"{system.experiment}_{dataset}"
  return f"{prefix}_eval_{split}"
