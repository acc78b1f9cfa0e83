"""Device mesh and logical-axis sharding, in the manner of t5x's PjitPartitioner.

The mesh has two axes: "data" (examples are split across it) and "model" (large weight
dimensions are split across it). Models never name mesh axes; they annotate parameters with
*logical* names (`nn.with_logical_partitioning`) and the rules below decide where each name
goes, so one gin binding moves a model between pure data parallelism and model parallelism.

Default rules (logical name -> mesh axis, None = replicated):
  batch  -> data    examples are independent, so the batch is split over data replicas
  embed  -> None    the hidden size is read by every layer; keeping it whole avoids gathers
  mlp    -> model   feed-forward width: the largest matrices, split Megatron-style
  heads  -> model   attention heads are independent, so they split cleanly
  kv     -> None    per-head width is small
  vocab  -> model   the embedding / output-softmax table is large
  length -> None    sequence positions stay together
  layers -> None    the stacked-layer axis of `BertConfig.scan_layers`: scan reads one layer's
                    slice per step, so every device holds every layer's (sharded) weights
A logical name with no rule is an error (a typo would otherwise silently replicate).
The same code runs unchanged on one CPU device: the mesh is then 1x1.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import gin
import jax
import numpy as np
from flax import linen as nn
from flax.core import meta
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from realm_bench.errors import InputError

MESH_AXES = ("data", "model")

DEFAULT_LOGICAL_AXIS_RULES: tuple[tuple[str, str | None], ...] = (
    ("batch", "data"),
    ("embed", None),
    ("mlp", "model"),
    ("heads", "model"),
    ("kv", None),
    ("vocab", "model"),
    ("length", None),
    ("layers", None),
)


def _is_box(x) -> bool:
  return isinstance(x, meta.AxisMetadata)


@gin.configurable
class Partitioner:
  """Owns the mesh and the logical axis rules; shards parameters and batches on it."""

  def __init__(self, num_partitions: int = 1,
               logical_axis_rules: Sequence[tuple[str, str | None]] = DEFAULT_LOGICAL_AXIS_RULES,
               devices: Sequence[jax.Device] | None = None):
    devices = list(jax.devices() if devices is None else devices)
    if num_partitions < 1 or len(devices) % num_partitions:
      raise InputError(f"must divide the device count {len(devices)}, got {num_partitions}",
                       field="num_partitions")
    self.num_partitions = num_partitions
    self.logical_axis_rules = tuple((str(name), axis) for name, axis in logical_axis_rules)
    for name, axis in self.logical_axis_rules:
      if axis is not None and axis not in MESH_AXES:
        raise InputError(f"rule {name!r} -> {axis!r}: mesh axes are {MESH_AXES} or None",
                         field="logical_axis_rules")
    # Auto axes: XLA propagates shardings inside the step, as t5x relies on; jax.make_mesh
    # would otherwise default to explicit-sharding mode.
    self.mesh = jax.make_mesh((len(devices) // num_partitions, num_partitions), MESH_AXES,
                              axis_types=(AxisType.Auto,) * len(MESH_AXES), devices=devices)

  @property
  def data_size(self) -> int:
    return self.mesh.shape["data"]

  def _mesh_spec(self, names: Sequence[str | None], where: str) -> PartitionSpec:
    known = dict(self.logical_axis_rules)
    for name in names:
      if name is not None and name not in known:
        raise InputError(f"logical axis {name!r} of parameter {where!r} has no rule; add "
                         f"('{name}', <mesh axis or None>) to Partitioner.logical_axis_rules",
                         field="logical_axis_rules")
    return nn.logical_to_mesh_axes(tuple(names), self.logical_axis_rules)

  def logical_shardings(self, tree) -> Any:
    """NamedShardings for the *unboxed* structure of `tree`; unannotated leaves replicate."""

    def sharding(path, leaf):
      if _is_box(leaf):
        spec = self._mesh_spec(leaf.names, jax.tree_util.keystr(path))
      else:
        spec = PartitionSpec()
      return NamedSharding(self.mesh, spec)

    return jax.tree_util.tree_map_with_path(sharding, tree, is_leaf=_is_box)

  def replicated(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec())

  def shard_params(self, params_or_abstract) -> Any:
    """Unboxes a (possibly logically annotated) tree and places it on the mesh.

    Abstract leaves (ShapeDtypeStruct, from `jax.eval_shape`) come back as ShapeDtypeStructs
    carrying their sharding, ready to be a restore or jit target; arrays are transferred.
    """
    shardings = self.logical_shardings(params_or_abstract)
    plain = meta.unbox(params_or_abstract)

    def place(x, sharding):
      if isinstance(x, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)
      return jax.device_put(x, sharding)

    return jax.tree.map(place, plain, shardings)

  def batch_sharding(self) -> NamedSharding:
    return NamedSharding(self.mesh, PartitionSpec("data"))

  def shard_batch(self, batch: Mapping[str, Any]) -> dict[str, jax.Array]:
    """Splits every array's leading (batch) dimension over the "data" axis.

    Host arrays are each process's slice of the global batch, so the same call works for one
    process or many (jax.distributed); device arrays (e.g. made by a hook) are resharded.
    """
    sharding = self.batch_sharding()
    local_data = max(1, self.data_size // jax.process_count())
    out = {}
    for key, value in batch.items():
      if np.ndim(value) == 0:
        raise InputError("batch arrays need a leading batch dimension; got a scalar",
                         field=key)
      if isinstance(value, jax.Array):
        if value.shape[0] % self.data_size:
          raise InputError(f"batch size {value.shape[0]} does not divide over "
                           f"{self.data_size} data-parallel devices", field=key)
        out[key] = value if value.sharding == sharding else jax.device_put(value, sharding)
        continue
      value = np.asarray(value)
      if value.shape[0] % local_data:
        raise InputError(f"batch size {value.shape[0]} does not divide over "
                         f"{self.data_size} data-parallel devices", field=key)
      out[key] = jax.make_array_from_process_local_data(sharding, value)
    return out

  def jit(self, fn: Callable, in_shardings, out_shardings, *,
          donate_argnums: Sequence[int] = (), compiler_options: dict | None = None) -> Callable:
    """jax.jit whose tracing sees this mesh and these rules (for nn.with_logical_constraint)."""
    jitted = jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings,
                     donate_argnums=tuple(donate_argnums), compiler_options=compiler_options)

    def call(*args):
      with jax.set_mesh(self.mesh), nn.logical_axis_rules(self.logical_axis_rules):
        return jitted(*args)

    def lower(*args):   # for XLA's memory and cost analyses before anything is allocated
      with jax.set_mesh(self.mesh), nn.logical_axis_rules(self.logical_axis_rules):
        return jitted.lower(*args)

    call.lower = lower
    return call
