"""Partitioning: logical rules, one-device meshes, and 8 simulated devices matching one."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import linen as nn
from jax.sharding import PartitionSpec

from realm_bench import partitioning
from realm_bench.errors import InputError
from toy_model import ToyModel, make_batches, toy_trainer

TESTS_DIR = Path(__file__).resolve().parent


def test_one_cpu_device_mesh_and_default_rules():
  partitioner = partitioning.Partitioner()
  assert dict(partitioner.mesh.shape) == {"data": 1, "model": 1}
  rules = dict(partitioner.logical_axis_rules)
  assert rules == {"batch": "data", "embed": None, "mlp": "model", "heads": "model", "kv": None,
                   "vocab": "model", "length": None, "layers": None}


def test_abstract_params_get_mesh_shardings_from_logical_names():
  partitioner = partitioning.Partitioner()
  boxed = jax.eval_shape(ToyModel().init_params, jax.random.PRNGKey(0), next(make_batches(0, 0)))
  abstract = partitioner.shard_params(boxed)
  kernel = abstract["Dense_0"]["kernel"]
  assert isinstance(kernel, jax.ShapeDtypeStruct) and kernel.shape == (8, 16)
  assert kernel.sharding.spec == PartitionSpec(None, "model")
  # ("mlp", "vocab") both map to "model"; a mesh axis can split only one dimension.
  assert abstract["Dense_1"]["kernel"].sharding.spec == PartitionSpec("model", None)
  assert abstract["LayerNorm_0"]["scale"].sharding.spec == PartitionSpec("model")


def test_concrete_params_and_batches_are_placed():
  partitioner = partitioning.Partitioner()
  boxed = jax.jit(ToyModel().init_params)(jax.random.PRNGKey(0), next(make_batches(0, 0)))
  placed = partitioner.shard_params(boxed)
  assert isinstance(placed["Dense_0"]["kernel"], jax.Array)
  batch = partitioner.shard_batch(next(make_batches(0, 0)))
  assert batch["inputs"].sharding.spec == PartitionSpec("data")
  with pytest.raises(InputError, match="leading batch dimension"):
    partitioner.shard_batch({"x": np.float32(1.0)})


def test_unknown_logical_axis_is_an_error_naming_the_parameter():
  partitioner = partitioning.Partitioner()
  tree = {"layer": {"kernel": nn.LogicallyPartitioned(jax.ShapeDtypeStruct((4, 4), np.float32),
                                                      ("embed", "qkv"))}}
  with pytest.raises(InputError, match=r"'qkv'.*'layer'.*'kernel'"):
    partitioner.shard_params(tree)


def test_num_partitions_must_divide_devices():
  with pytest.raises(InputError, match="num_partitions"):
    partitioning.Partitioner(num_partitions=3)
  with pytest.raises(InputError, match="mesh axes"):
    partitioning.Partitioner(logical_axis_rules=[("batch", "replica")])


_MULTI_DEVICE = """
import json, sys
sys.path.insert(0, {tests!r})
import jax
from realm_bench import optim, partitioning, trainer
from toy_model import ToyModel, make_batches
assert len(jax.devices()) == 8, jax.devices()
out = {{}}
for parts in (2,):
  tx = optim.make_optimizer(learning_rate=1e-2, warmup_steps=3, total_steps=40)
  t = trainer.Trainer(ToyModel(), tx, partitioning.Partitioner(num_partitions=parts),
                      dropout_seed=7)
  batches = make_batches(0, 0)
  state = t.init_state(jax.random.PRNGKey(0), next(make_batches(0, 0)))
  losses = []
  for _ in range(4):
    state, metrics = t.train_step(state, next(batches))
    losses.append(float(metrics["loss"]))
  kernel = state.params["Dense_0"]["kernel"]
  out[str(parts)] = {{"losses": losses, "mesh": dict(t.partitioner.mesh.shape),
                     "kernel_shards": len(kernel.addressable_shards),
                     "kernel_spec": str(kernel.sharding.spec)}}
print("RESULT " + json.dumps(out))
"""


def test_data_4_by_model_2_on_8_simulated_devices_matches_one_device():
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
             XLA_FLAGS="--xla_force_host_platform_device_count=8")
  proc = subprocess.run([sys.executable, "-c", _MULTI_DEVICE.format(tests=str(TESTS_DIR))],
                        env=env, capture_output=True, text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(proc.stdout.split("RESULT ", 1)[1])
  one = toy_trainer()
  state = one.init_state(jax.random.PRNGKey(0), next(make_batches(0, 0)))
  batches = make_batches(0, 0)
  losses = []
  for _ in range(4):
    state, metrics = one.train_step(state, next(batches))
    losses.append(float(metrics["loss"]))
  assert result["2"]["mesh"] == {"data": 4, "model": 2}
  assert result["2"]["kernel_shards"] == 8 and "model" in result["2"]["kernel_spec"]
  np.testing.assert_allclose(result["2"]["losses"], losses, atol=1e-5, rtol=0)
