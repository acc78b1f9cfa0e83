"""The quickstart end to end with tiny stage sizes (slow: `make test-slow`)."""
from __future__ import annotations

import pytest

from realm_bench import cli
from realm_bench.reporting.records import read_record


@pytest.mark.slow
def test_quickstart_writes_records_and_tables(tmp_path, capsys):
  small = [f"--gin.QuickstartConfig.{k}={v}" for k, v in dict(
      ict_steps=20, retriever_warmup_steps=4, pretrain_steps=10, refresh_every=5,
      finetune_steps=10).items()]
  assert cli.main(["quickstart", "--out", str(tmp_path), "--gin_file", "runs/quickstart.gin",
                   "--gin.QuickstartConfig.world_gin='world/tiny.gin'", *small]) == 0
  runs = tmp_path / "runs"
  realm = read_record(runs / "realm_eval_test" / "record.json")
  closed = read_record(runs / "closed_book_eval_test" / "record.json")
  recall = read_record(runs / "realm_recall_dev" / "record.json")
  assert realm.experiment == "realm" and closed.experiment == "closed_book"
  assert set(closed.metrics) == {"exact_match"} and len(closed.outcomes) == closed.num_examples
  assert recall.lineage == "realm_pretrain" and "recall@5" in recall.metrics
  assert read_record(runs / "realm_pretrain").stats["num_refreshes"] == 2
  # REALM's joint phase starts from the retriever's warm-up under BERT's reader.
  assert read_record(runs / "realm_pretrain").lineage == "realm_pretrain_retriever_warmup"
  assert "Synthetic scale" in (tmp_path / "tables" / "table1.md").read_text()
  # Every stage read the corpus from one shared copy of its token files, none from its own.
  assert len(list((tmp_path / "corpus_tokens").iterdir())) == 1
  assert not list(runs.glob("*/corpus_tokens"))
  printed = capsys.readouterr().out   # the summary, from the records just written
  assert "| REALM − ORQA, EM test |" in printed and "| oracle (gold block) | 100.0 |" in printed
  # Rerunning skips every finished stage.
  assert cli.main(["quickstart", "--out", str(tmp_path), "--gin_file", "runs/quickstart.gin",
                   "--gin.QuickstartConfig.world_gin='world/tiny.gin'", *small]) == 0
  assert "done already" in capsys.readouterr().out
