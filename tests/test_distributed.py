"""The in-process parts of multi-process runs: configs, data shards, the top-k merge, the
launcher's checks. The processes themselves are tests/test_multihost.py (`make test-multihost`)."""
from __future__ import annotations

import io
import json
import sys

import numpy as np
import pytest

from realm_bench import distributed, iteration, launch_local
from realm_bench.errors import InputError
from realm_bench.retrieval import index, sharded_index


def test_default_config_runs_alone():
  assert not distributed.DistributedConfig().enabled
  assert distributed.initialize(config=distributed.DistributedConfig()) is False


@pytest.mark.parametrize("fields, bad", [
    ({"coordinator_address": "localhost"}, "coordinator_address"),
    ({"coordinator_address": "h:1", "num_processes": 2}, "process_id"),
    ({"coordinator_address": "h:1", "num_processes": 2, "process_id": 2}, "process_id"),
    ({"coordinator_address": "h:1", "num_processes": 0, "process_id": 0}, "num_processes"),
    ({"coordinator_address": "h:1", "num_processes": True, "process_id": 0}, "num_processes"),
    ({"num_processes": 2, "process_id": 1}, "coordinator_address"),
    ({"auto_detect": True, "cpu_collectives": "nccl"}, "cpu_collectives"),
    ({"auto_detect": True, "local_device_ids": "0,1"}, "local_device_ids"),
])
def test_bad_config_names_the_field(fields, bad):
  with pytest.raises(InputError, match=f"DistributedConfig.{bad}"):
    distributed.DistributedConfig(**fields).check()


def test_config_from_launcher_environment():
  env = {distributed.ENV_COORDINATOR: "127.0.0.1:1234", distributed.ENV_NUM_PROCESSES: "2",
         distributed.ENV_PROCESS_ID: "1"}
  config = distributed.DistributedConfig.from_environment(env)
  assert config.enabled and (config.num_processes, config.process_id) == (2, 1)
  config.check()
  with pytest.raises(InputError, match=distributed.ENV_PROCESS_ID):
    distributed.DistributedConfig.from_environment({**env, distributed.ENV_PROCESS_ID: "x"})
  assert not distributed.DistributedConfig.from_environment({}).enabled


def test_data_shards_are_contiguous_slices_of_each_global_batch():
  batch = {"x": np.arange(8), "y": [f"e{i}" for i in range(8)], "n": 3}
  halves = [distributed.DataShard(i, 2).local_batch(batch) for i in range(2)]
  np.testing.assert_array_equal(np.concatenate([h["x"] for h in halves]), batch["x"])
  assert halves[1]["y"] == ["e4", "e5", "e6", "e7"] and halves[1]["n"] == 3
  with pytest.raises(InputError, match="batch_size"):
    distributed.DataShard(0, 3).rows(8)
  with pytest.raises(InputError, match="DataShard.index"):
    distributed.DataShard(2, 2)


def test_sharded_iterator_shares_the_global_position():
  def make(seed, position):
    i = position
    while True:
      yield [(seed, i, r) for r in range(4)]
      i += 1
  batches = distributed.ShardedIterator(iteration.DeterministicIterator(make, seed=5),
                                        distributed.DataShard(1, 2))
  assert batches.peek() == [(5, 0, 2), (5, 0, 3)]
  next(batches)
  assert batches.get_state() == {"seed": 5, "position": 1}
  batches.set_state({"seed": 5, "position": 7})
  assert next(batches) == [(5, 7, 2), (5, 7, 3)]
  one = iteration.DeterministicIterator(make, seed=5)
  assert distributed.shard_batches(one, distributed.DataShard(0, 1)) is one


def test_row_ranges_cover_the_corpus_once():
  for rows, n in ((10, 3), (2, 4), (13_353_718, 16)):
    ranges = [distributed.row_range(rows, distributed.DataShard(i, n)) for i in range(n)]
    assert ranges[0][0] == 0 and ranges[-1][1] == rows
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert max(b - a for a, b in ranges) - min(b - a for a, b in ranges) <= 1


def test_merged_per_shard_top_k_equals_exact_search():
  rng = np.random.default_rng(0)
  rows = rng.normal(size=(1000, 8)).astype(np.float32)
  ids = np.arange(1000, dtype=np.int64) + 100
  queries = rng.normal(size=(5, 8)).astype(np.float32)
  shards = [distributed.row_range(1000, distributed.DataShard(i, 3)) for i in range(3)]
  candidates = []
  for start, stop in shards:
    local = index.ExactIndex(top_k_block=32)
    local.build(rows[start:stop], ids[start:stop])
    candidates.append(local.search(queries, 10))
  scores, found = sharded_index.merge_top_k(np.stack([c[0] for c in candidates]),
                                            np.stack([c[1] for c in candidates]), 10)
  want_scores, want_rows = index.exact_top_k(rows, queries, 10)
  np.testing.assert_array_equal(found, ids[want_rows])
  np.testing.assert_allclose(scores, want_scores, atol=1e-5, rtol=0)


def test_ties_break_by_global_row_order():
  scores = np.array([[[1.0, 0.5]], [[1.0, 0.75]]], np.float32)
  ids = np.array([[[10, 11]], [[20, 21]]])
  s, i = sharded_index.merge_top_k(scores, ids, 3)
  assert i.tolist() == [[10, 20, 21]] and s.tolist() == [[1.0, 1.0, 0.75]]


def test_sharded_index_in_one_process_is_the_local_index():
  rng = np.random.default_rng(1)
  rows = rng.normal(size=(300, 4)).astype(np.float32)
  sharded = sharded_index.DistributedExactIndex(top_k_block=16)
  sharded.build(rows, np.arange(300))
  assert sharded.manifest["sharded_over"] == 1 and sharded.manifest["global_num_blocks"] == 300
  exact = index.ExactIndex(top_k_block=16)
  exact.build(rows, np.arange(300))
  for got, want in zip(sharded.search(rows[:3], 400), exact.search(rows[:3], 400)):
    np.testing.assert_array_equal(got, want)


def test_launcher_reports_the_first_failure_and_checks_its_arguments():
  out = io.StringIO()
  code = "import os, sys; sys.exit(3 if os.environ['REALM_BENCH_PROCESS_ID'] == '1' else 0)"
  assert launch_local.launch(command=[sys.executable, "-c", code], processes=2, out=out) == 3
  with pytest.raises(InputError, match="processes"):
    launch_local.launch(command=["true"], processes=0)
  with pytest.raises(InputError, match="command"):
    launch_local.launch(command=[], processes=2)
  assert launch_local.main(["--processes", "0", "--", "true"]) == 2


def test_a_sharded_version_is_whole_only_with_its_manifest_and_loads_per_process(tmp_path):
  """Each process saves its own shard; process 0's manifest (written last) marks the version
  whole; a shard is loaded back only for the process count that wrote it."""
  rng = np.random.default_rng(2)
  rows = rng.normal(size=(10, 4)).astype(np.float32)
  counts = lambda local: np.array([[6], [4]])   # the row counts of two processes
  shards = []
  for process, (start, stop) in enumerate([(0, 6), (6, 10)]):
    local = index.ExactIndex()
    local.build(rows[start:stop], np.arange(start, stop),
                manifest={"embedder_step": 4, "row_range": [start, stop]})
    shards.append(sharded_index.ShardedIndex.wrap(local, row_range=(start, stop),
                                                  gather=counts))
  version = tmp_path / "v00000004"
  shards[1].save(version, process=1)
  with pytest.raises(InputError, match="not a whole sharded index"):
    sharded_index.ShardedIndex.load_shard(version, process=1, processes=2, gather=counts)
  shards[0].save(version, process=0)
  manifest = json.loads((version / "manifest.json").read_text())
  assert manifest["shards"] == ["shard_00000", "shard_00001"]
  assert manifest["num_blocks"] == manifest["global_num_blocks"] == 10
  loaded = sharded_index.ShardedIndex.load_shard(version, process=1, processes=2, gather=counts)
  np.testing.assert_array_equal(loaded.local.ids, np.arange(6, 10))
  assert loaded.manifest["row_range"] == [6, 10] and loaded.manifest["embedder_step"] == 4
  with pytest.raises(InputError, match="this run has 3"):
    sharded_index.ShardedIndex.load_shard(version, process=1, processes=3, gather=counts)


def test_processes_agree_on_the_newest_version_all_of_them_hold():
  from realm_bench.retrieval import sharded_async_refresh  # pylint: disable=g-import-not-at-top
  agreed = sharded_async_refresh.agreed_version
  assert agreed(np.array([[0, 2, 6, -1], [0, 2, 4, -1]])) == 2   # one skipped v4, one has no v6
  assert agreed(np.array([[0, 2, 4, 6], [0, 2, 4, 6]])) == 6
  assert agreed(np.array([[-1, -1], [0, -1]])) is None             # a process holds none yet


def test_a_host_builder_removes_only_its_own_unfinished_work(tmp_path):
  from realm_bench.retrieval import async_refresh  # pylint: disable=g-import-not-at-top
  (tmp_path / ".shard_00001.work-v00000002").mkdir()
  (tmp_path / ".shard_00000.work-v00000002").mkdir()          # the other host's, at work
  (tmp_path / "v00000002" / ".shard_00001.x1").mkdir(parents=True)
  (tmp_path / "v00000002" / "shard_00000").mkdir()
  assert async_refresh.remove_unfinished_work(tmp_path, shard=1) == [
      ".shard_00001.work-v00000002", ".shard_00001.x1"]
  assert sorted(p.name for p in tmp_path.rglob("*")) == [
      ".shard_00000.work-v00000002", "shard_00000", "v00000002"]
