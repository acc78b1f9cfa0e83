"""The pieces the trainer and the index builder exchange: exports, versions, pruning, config."""
from __future__ import annotations

import numpy as np
import pytest

from realm_bench.errors import InputError
from realm_bench.retrieval import async_refresh, refresh
from realm_bench.retrieval.index import ExactIndex


def test_embedder_exports_round_trip_and_list_in_step_order(tmp_path):
  params = {"encoder": {"kernel": np.arange(6, dtype=np.float32).reshape(2, 3)}}
  for step in (10, 2):
    async_refresh.export_embedder(tmp_path, step, params)
  (tmp_path / ".step_00000011.msgpack.tmp").write_bytes(b"half")   # an unfinished write
  assert [s for s, _ in async_refresh.exports(tmp_path)] == [2, 10]
  restored = async_refresh.load_export(async_refresh.exports(tmp_path)[-1][1])
  np.testing.assert_array_equal(restored["retriever"]["encoder"]["kernel"],
                                params["encoder"]["kernel"])


def test_versions_are_written_whole_and_pruned_around_protected_ones(tmp_path):
  for step in (0, 5, 10, 15):
    index = ExactIndex()
    index.build(np.eye(3, dtype=np.float32), np.arange(3), manifest={"embedder_step": step})
    refresh.write_version(index, tmp_path, step)
  assert refresh.latest_version(tmp_path).name == "v00000015"
  refresh.prune_versions(tmp_path, keep=2, protected={"v00000005"})
  assert sorted(p.name for p in tmp_path.glob("v*")) == ["v00000005", "v00000010",
                                                          "v00000015"]
  assert not list(tmp_path.glob(".*"))


def test_refresh_config_rejects_unknown_modes():
  with pytest.raises(InputError, match="'sync' or 'async'"):
    refresh.RefreshConfig(mode="eventually")
  with pytest.raises(InputError, match="at least 1"):
    refresh.RefreshConfig(refresh_every_steps=0)


def test_a_builder_whose_trainer_has_gone_exits(tmp_path, capsys):
  import os, types  # pylint: disable=g-import-not-at-top,multiple-imports
  model = types.SimpleNamespace(embed_docs=lambda params, ids: ids)
  async_refresh.serve(run_dir=str(tmp_path), config_text="", model=model,
                index_prototype=ExactIndex(), embed_batch_size=4,
                poll_seconds=0.01, parent_pid=os.getppid() + 1)
  assert "trainer has gone" in capsys.readouterr().out


def test_a_resume_discards_versions_and_exports_made_after_its_step(tmp_path):
  for step in (0, 10, 20):
    index = ExactIndex()
    index.build(np.eye(3, dtype=np.float32), np.arange(3), manifest={"embedder_step": step})
    refresh.write_version(index, tmp_path, step)
    async_refresh.export_embedder(tmp_path / "exports", step, {"w": np.zeros(2, np.float32)})
  assert refresh.discard_versions_after(tmp_path, 10) == ["v00000020"]
  assert async_refresh.discard_exports_after(tmp_path / "exports", 10) == [20]
  assert refresh.latest_version(tmp_path).name == "v00000010"
  assert [s for s, _ in async_refresh.exports(tmp_path / "exports")] == [0, 10]
  assert refresh.discard_versions_after(tmp_path, 10) == []
  refresh.discard_versions_after(tmp_path, -1)   # killed before its first checkpoint
  assert refresh.latest_version(tmp_path) is None and not (tmp_path / "LATEST").exists()


def test_a_builder_removes_the_unfinished_work_of_the_one_before_it(tmp_path, capsys):
  import os, types  # pylint: disable=g-import-not-at-top,multiple-imports
  index_root = tmp_path / "index"
  (index_root / ".work-v00000030").mkdir(parents=True)   # a killed builder's shards
  (index_root / ".work-v00000030" / "shard-00000.npy").write_bytes(b"x" * 100)
  (index_root / ".v00000030.k2j4").mkdir()               # a version killed while saving
  (index_root / ".LATEST.abc.tmp").write_text("v0000")
  (index_root / "v00000020").mkdir()
  model = types.SimpleNamespace(embed_docs=lambda params, ids: ids)
  async_refresh.serve(run_dir=str(tmp_path), config_text="", model=model,
                      index_prototype=ExactIndex(), embed_batch_size=4,
                      poll_seconds=0.01, parent_pid=os.getppid() + 1)
  assert sorted(p.name for p in index_root.iterdir()) == ["v00000020"]
  assert ".work-v00000030" in capsys.readouterr().out
