"""JAX's multi-controller runtime: joining the processes of one run, and what each one reads.

REALM was trained on 64 TPU cores with the index on 16 more; beyond one host every process runs
this same program (`jax.distributed`), sees the global mesh and holds only its own devices'
shards. This module is the only place that knows about it:

- `DistributedConfig` / `initialize`: joins the run. Explicit (coordinator address, process
  count and id: a local launch, `realm_bench.launch_local`) or JAX's cluster auto-detection
  (`auto_detect=True`: Cloud TPU pods, SLURM, Open MPI, GKE), or nothing at all (the default: one
  process, exactly as before). It must run before anything touches a JAX device, so `train`
  calls it first, and on CPU it selects gloo for the cross-process collectives.
- `DataShard`: which rows of every global batch this process feeds. We split each global
  batch into contiguous per-process slices (process i of n holds rows [i*B/n, (i+1)*B/n)),
  not seqio's `ShardInfo` interleaving (examples i::n): the global batch of step s is then the
  same array for any process count, so a 2-process run reproduces a 1-process run row for row
  (per-row dropout masks included), and a resumed run needs only the one shared position. It
  is also what `jax.make_array_from_process_local_data` expects of a mesh whose "data" axis is
  process-major, which `jax.make_mesh` over `jax.devices()` is.
- `row_range`: the contiguous block of corpus rows a process embeds and searches.
- `is_primary`: process 0 writes records, logs and other single-copy files.
- `allgather`, `barrier`, `host_local`: the few host-side collectives the index refresh needs
  (every process calls them at the same point, as it calls the training step). They are
  no-ops in a one-process run, so that path stays what it was.
"""
from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Mapping, Sequence

import gin
import numpy as np

from realm_bench import validate
from realm_bench.errors import InputError

CPU_COLLECTIVES = ("gloo", "mpi")
# What `launch_local` sets in each child (and a job script may set): used when the gin config
# does not enable a multi-process run itself.
ENV_COORDINATOR = "REALM_BENCH_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "REALM_BENCH_NUM_PROCESSES"
ENV_PROCESS_ID = "REALM_BENCH_PROCESS_ID"
_ADDRESS = re.compile(r"^\[?[A-Za-z0-9_.:-]+\]?:\d{1,5}$")


@gin.configurable
@dataclasses.dataclass(frozen=True)
class DistributedConfig:
  """How this process joins a multi-process run (all None / False: it runs alone).

  coordinator_address  "host:port" of process 0's coordinator service.
  num_processes        processes in the run; process_id: this one's index, 0-based.
  local_device_ids     the local devices this process uses (default: all of them).
  auto_detect          let JAX read the cluster's environment (TPU pod, SLURM, Open MPI,
                       GKE); any field given here overrides what it detects.
  cluster_detection_method  force one detector (e.g. "slurm"); implies auto_detect.
  cpu_collectives      cross-process collectives on the CPU backend ("gloo" or "mpi").
  initialization_timeout  seconds to wait for every process to join.
  """
  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  local_device_ids: Sequence[int] | None = None
  auto_detect: bool = False
  cluster_detection_method: str | None = None
  cpu_collectives: str = "gloo"
  initialization_timeout: int = 300

  @classmethod
  def from_environment(cls, environ: Mapping[str, str] | None = None) -> DistributedConfig:
    """The config the REALM_BENCH_* variables give (all unset: one process)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, key in (("num_processes", ENV_NUM_PROCESSES), ("process_id", ENV_PROCESS_ID)):
      if environ.get(key):
        try:
          values[name] = int(environ[key])
        except ValueError:
          raise InputError(f"expected a whole number, got {environ[key]!r}",
                           field=key) from None
    return cls(coordinator_address=environ.get(ENV_COORDINATOR) or None, **values)

  @property
  def enabled(self) -> bool:
    return bool(self.coordinator_address or self.auto_detect or self.cluster_detection_method)

  def check(self) -> None:
    """Raises InputError naming the first field that is wrong."""
    where = "DistributedConfig."
    if self.coordinator_address is not None and (
        not isinstance(self.coordinator_address, str)
        or not _ADDRESS.match(self.coordinator_address)):
      raise InputError(f"expected 'host:port', got {self.coordinator_address!r}",
                       field=where + "coordinator_address")
    for name, minimum in (("num_processes", 1), ("process_id", 0),
                          ("initialization_timeout", 1)):
      validate.whole("DistributedConfig", name, getattr(self, name), minimum=minimum,
                     optional=True, field=where + name)
    if (self.num_processes is not None and self.process_id is not None
        and self.process_id >= self.num_processes):
      raise InputError(f"must be below num_processes={self.num_processes}, got "
                       f"{self.process_id}", field=where + "process_id")
    explicit = self.coordinator_address is not None and not (
        self.auto_detect or self.cluster_detection_method)
    if explicit:
      for name in ("num_processes", "process_id"):
        if getattr(self, name) is None:
          raise InputError("required with a coordinator_address (or set auto_detect=True to "
                           "let JAX read it from the cluster)", field=where + name)
    elif not self.enabled and (self.num_processes not in (None, 1) or self.process_id):
      raise InputError("a multi-process run needs a coordinator_address or auto_detect=True",
                       field=where + "coordinator_address")
    if self.cpu_collectives not in CPU_COLLECTIVES:
      raise InputError(f"expected one of {CPU_COLLECTIVES}, got {self.cpu_collectives!r}",
                       field=where + "cpu_collectives")
    if self.local_device_ids is not None and (
        isinstance(self.local_device_ids, (str, bytes))
        or not all(isinstance(i, int) and i >= 0 for i in self.local_device_ids)):
      raise InputError(f"expected a list of device ordinals, got {self.local_device_ids!r}",
                       field=where + "local_device_ids")


_initialized: DistributedConfig | None = None


def initialize(*, config: DistributedConfig | None = None) -> bool:
  """Joins the multi-process run `config` describes; True when this process is part of one.

  Idempotent (a second call with the same config does nothing; a different one is an error),
  and a no-op for a config that is not `enabled` when the REALM_BENCH_* variables
  (`launch_local`) do not enable one either. Call before any JAX computation: the
  coordinator must be reached before the backends are created.
  """
  global _initialized
  config = DistributedConfig() if config is None else config
  if not config.enabled:   # the launcher's variables, when gin does not say
    env = DistributedConfig.from_environment()
    if env.enabled:
      config = dataclasses.replace(config, coordinator_address=env.coordinator_address,
                                   num_processes=env.num_processes, process_id=env.process_id)
  config.check()
  if not config.enabled:
    return False
  if _initialized is not None:
    if _initialized != config:
      raise InputError(f"this process already joined a run as {_initialized}",
                       field="DistributedConfig")
    return True
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update("jax_cpu_collectives_implementation", config.cpu_collectives)
  kwargs: dict[str, Any] = {"initialization_timeout": config.initialization_timeout}
  for name in ("coordinator_address", "num_processes", "process_id",
               "cluster_detection_method"):
    if getattr(config, name) is not None:
      kwargs[name] = getattr(config, name)
  if config.local_device_ids is not None:
    kwargs["local_device_ids"] = list(config.local_device_ids)
  try:
    jax.distributed.initialize(**kwargs)
  except (ValueError, RuntimeError) as e:
    raise InputError(f"could not join the multi-process run ({e})",
                     field="DistributedConfig") from None
  _initialized = config
  return True


def process_index() -> int:
  import jax  # pylint: disable=g-import-not-at-top
  return jax.process_index()


def process_count() -> int:
  import jax  # pylint: disable=g-import-not-at-top
  return jax.process_count()


def is_primary() -> bool:
  """Process 0: the one that writes records, metrics, configs and other single-copy files."""
  return process_index() == 0


def allgather(local) -> np.ndarray:
  """[processes, ...]: every process's `local` (a small host array), on every process."""
  local = np.asarray(local)
  if process_count() == 1:
    return local[None]
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  return np.asarray(multihost_utils.process_allgather(local, tiled=False))


def barrier(name: str) -> None:
  """Waits until every process has reached the barrier of this `name`: a file one process
  writes on the shared run folder is there for the others after it."""
  if process_count() > 1:
    from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
    multihost_utils.sync_global_devices(name)


def host_local(tree) -> Any:
  """A numpy copy of a tree of (possibly global) arrays, whole on every process.

  What a computation that differs per process (embedding this host's rows of the corpus)
  needs: global parameters would make it an SPMD program over every host's devices, which
  assumes the same inputs everywhere. Leaves another process holds part of are gathered, so
  every process must call this at the same point when any leaf is sharded across processes.
  """
  import jax  # pylint: disable=g-import-not-at-top

  def to_host(leaf):
    if isinstance(leaf, jax.Array) and not (leaf.is_fully_addressable
                                            or leaf.is_fully_replicated):
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
    return np.asarray(leaf)

  return jax.tree.map(to_host, tree)


@dataclasses.dataclass(frozen=True)
class DataShard:
  """This process's part of every global batch: contiguous rows `index`-th of `num_shards`."""
  index: int = 0
  num_shards: int = 1

  def __post_init__(self):
    if not 0 <= self.index < self.num_shards:
      raise InputError(f"expected 0 <= index < num_shards, got {self.index} of "
                       f"{self.num_shards}", field="DataShard.index")

  @classmethod
  def of_this_process(cls) -> DataShard:
    return cls(process_index(), process_count())

  def rows(self, global_rows: int, *, field: str = "batch_size") -> slice:
    """The slice of a global batch of `global_rows` this shard holds."""
    if global_rows % self.num_shards:
      raise InputError(f"{global_rows} rows do not split over {self.num_shards} processes",
                       field=field)
    per = global_rows // self.num_shards
    return slice(self.index * per, (self.index + 1) * per)

  def local_batch(self, batch: Mapping[str, Any]) -> dict[str, Any]:
    """This shard's rows of every array of a global host batch (others pass through)."""
    if self.num_shards == 1:
      return dict(batch)
    out = {}
    for key, value in batch.items():
      if isinstance(value, (np.ndarray, list, tuple)) and np.ndim(value) >= 1:
        out[key] = value[self.rows(len(value), field=key)]
      else:
        out[key] = value
    return out


def row_range(num_rows: int, shard: DataShard) -> tuple[int, int]:
  """[start, stop) of the corpus rows `shard` owns: contiguous, the first `num_rows % n`
  shards one row longer (so any corpus size splits; the merge does not need equal shards)."""
  per, extra = divmod(int(num_rows), shard.num_shards)
  start = shard.index * per + min(shard.index, extra)
  return start, start + per + (1 if shard.index < extra else 0)


def cpu_device_flags(devices_per_process: int) -> dict[str, str]:
  """Environment for a child process simulating `devices_per_process` CPU devices."""
  flags = os.environ.get("XLA_FLAGS", "")
  flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", flags).strip()
  return {"XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count="
                       f"{int(devices_per_process)}".strip(),
          "JAX_PLATFORMS": "cpu"}


def local_rows(item: Any, shard: DataShard) -> Any:
  """This shard's rows of one raw batch: a list of examples or a dict of host arrays."""
  if shard.num_shards == 1:
    return item
  if isinstance(item, Mapping):
    return shard.local_batch(item)
  if isinstance(item, (list, tuple, np.ndarray)):
    return item[shard.rows(len(item))]
  raise TypeError(f"cannot split a batch of type {type(item).__name__} over processes")


class ShardedIterator:
  """A `DeterministicIterator` of global batches that yields this process's rows of each.

  The position (and so every checkpoint's data state) is the global one, shared by all
  processes: a run resumed with the same process count continues exactly, and the global batch
  of a step does not depend on how many processes split it.
  """

  def __init__(self, batches, shard: DataShard):
    self.batches = batches
    self.shard = shard

  def __iter__(self):
    return self

  def __next__(self):
    return local_rows(next(self.batches), self.shard)

  def peek(self):
    return local_rows(self.batches.peek(), self.shard)

  @property
  def seed(self) -> int:
    return self.batches.seed

  @property
  def position(self) -> int:
    return self.batches.position

  def get_state(self) -> dict[str, int]:
    return self.batches.get_state()

  def set_state(self, state) -> None:
    self.batches.set_state(state)


def shard_batches(batches, shard: DataShard | None = None):
  """`batches` split over the processes of this run (unchanged in a one-process run)."""
  shard = DataShard.of_this_process() if shard is None else shard
  return batches if shard.num_shards == 1 else ShardedIterator(batches, shard)
