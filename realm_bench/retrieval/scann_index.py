"""ScaNN behind `MipsIndex`: tree partitioning, anisotropic hashing and exact re-ranking.

A search scores the query against every leaf centroid, scans the `leaves_to_search` best
leaves with 4-bit asymmetric-hashing codes (lookup tables, no float math per document), keeps
the `reorder_num_neighbors` best of those and re-scores them exactly against the float32 rows.
Every build measures its recall@k against exact brute force and writes it into the manifest,
so an index that lost recall says so instead of silently returning worse neighbours.

Saving writes ScaNN's own serialised searcher into `scann/` beside the embeddings; loading
deserialises it, which is seconds where training the tree and the codebooks was minutes. The
float32 copy ScaNN keeps for re-ranking is the same bytes as `embeddings.npy`, so on disk it is
a hard link to that file rather than a second 6.8 GB copy (where the filesystem allows links).
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import gin
import numpy as np

from realm_bench.errors import InputError
from realm_bench.retrieval.index import MipsIndex, embeddings_checksum, exact_top_k

# ScaNN's package imports TensorFlow on the way to its pybind module.
from scann.scann_ops.py import scann_ops_pybind  # pylint: disable=g-bad-import-order

# Asymmetric hashing trains 16 centres per block, and below a few hundred rows scanning every
# row costs less than scoring the tree's centroids, so tiny corpora use ScaNN's brute force.
MIN_ROWS_FOR_TREE = 256
REORDER_DTYPES = {"float32": scann_ops_pybind.scann_builder.ReorderType.FLOAT32,
                  "bfloat16": scann_ops_pybind.scann_builder.ReorderType.BFLOAT16,
                  "int8": scann_ops_pybind.scann_builder.ReorderType.INT8}
SEARCHER_DIR = "scann"


@dataclasses.dataclass(frozen=True)
class ScannParams:
  """Everything a built searcher was made with; the manifest stores it under `scann`."""
  mode: str                       # "tree_ah", or "brute_force" below MIN_ROWS_FOR_TREE rows
  num_leaves: int
  leaves_to_search: int
  training_sample_size: int
  dimensions_per_block: int
  anisotropic_quantization_threshold: float
  reorder_num_neighbors: int
  reorder_dtype: str
  training_threads: int
  search_threads: int


def _cpus() -> int:
  return len(os.sched_getaffinity(0))


def resolve_params(num_rows: int, *, k: int = 10, num_leaves: int | None = None,
                   leaves_to_search: int | None = None,
                   training_sample_size: int | None = None, dimensions_per_block: int = 2,
                   anisotropic_quantization_threshold: float = 0.2,
                   reorder_num_neighbors: int | None = None, reorder_dtype: str = "float32",
                   training_threads: int | None = None,
                   search_threads: int | None = None) -> ScannParams:
  """Fills every knob left as None from the corpus size; the rules and why:

  - `num_leaves = round(sqrt(n))`: a query pays for scoring all centroids plus scanning its
    leaves, `L + s * n / L` for L leaves of which a fixed share s is searched; that is least
    near L = sqrt(n) (ScaNN's own guidance too). 13.35M rows -> 3654 leaves of ~3650 rows.
  - `leaves_to_search = max(ceil(num_leaves / 10), min(num_leaves, 16))`: a fixed share of
    the leaves keeps the recall of queries whose neighbours straddle leaf borders roughly
    constant as n grows. 10%, because on clustered 128-d data (benchmarks/mips.py, 1M rows)
    5% reached recall@10 0.989 and 10% 0.997. The floor of 16 protects small trees, where
    10% is a leaf or two.
  - `training_sample_size = min(n, max(100_000, 64 * num_leaves))`: k-means needs a few dozen
    rows per centroid to place it; more only lengthens the build (the whole corpus is still
    assigned to leaves and hashed, the sample only trains centroids and codebooks).
  - `reorder_num_neighbors = max(100, 10 * k)`: hashed scores only rank candidates, and the
    best 10k of them re-scored in float32 hold the true top k once the right leaves were
    searched (100 and 250 gave the same recall@10 there, 250 searched 30% slower).
  - `dimensions_per_block = 2` and `anisotropic_quantization_threshold = 0.2` are ScaNN's
    recommended asymmetric hashing for inner products (4 bits per 2 dimensions, the loss
    weighting the error parallel to a row more, which is the part that changes its score).
  - threads: every CPU this process may use.
  """
  if num_rows < 1:
    raise ValueError("a ScaNN index needs at least one row")
  mode = "tree_ah" if num_rows >= MIN_ROWS_FOR_TREE else "brute_force"
  if reorder_dtype not in REORDER_DTYPES:
    raise ValueError(f"reorder_dtype {reorder_dtype!r} is not one of {sorted(REORDER_DTYPES)}")
  leaves = num_leaves or max(1, round(math.sqrt(num_rows)))
  leaves = min(leaves, num_rows)
  search = leaves_to_search or max(math.ceil(leaves / 10), min(leaves, 16))
  return ScannParams(
      mode=mode, num_leaves=int(leaves), leaves_to_search=int(min(search, leaves)),
      training_sample_size=int(training_sample_size
                               or min(num_rows, max(100_000, 64 * leaves))),
      dimensions_per_block=int(dimensions_per_block),
      anisotropic_quantization_threshold=float(anisotropic_quantization_threshold),
      reorder_num_neighbors=int(reorder_num_neighbors or max(100, 10 * k)),
      reorder_dtype=reorder_dtype, training_threads=int(training_threads or _cpus()),
      search_threads=int(search_threads or _cpus()))


def perturbed_queries(embeddings: np.ndarray, num: int, *, noise: float,
                      seed: int) -> np.ndarray:
  """`num` rows drawn without replacement, plus Gaussian noise of `noise` times their spread.

  A stored row used as its own query sits in its own leaf and scores itself exactly, which
  flatters an approximate index; retriever queries come from the query tower and are never
  stored rows, so the recall check moves each sampled row off the data by a fixed share of
  the rows' own standard deviation.
  """
  rng = np.random.default_rng(seed)
  rows = np.sort(rng.choice(embeddings.shape[0], size=min(num, embeddings.shape[0]),
                            replace=False))
  sample = np.asarray(embeddings[rows], np.float32)
  scale = noise * float(sample.std())
  return (sample + scale * rng.standard_normal(sample.shape, np.float32)).astype(np.float32)


def recall_at_k(approx: np.ndarray, exact: np.ndarray) -> float:
  """Mean share of each query's exact top-k found in its approximate top-k."""
  if exact.size == 0:
    return 1.0
  hits = [len(np.intersect1d(a, e)) for a, e in zip(approx, exact)]
  return float(np.sum(hits) / exact.size)


@gin.configurable
class ScannIndex(MipsIndex):
  """Approximate MIPS with ScaNN; recall@k against exact search is measured at every build.

  Knobs left as None are chosen from the corpus size by `resolve_params` (see there for the
  rules). `reorder_dtype` ("float32", "bfloat16", "int8") is the precision of the copy ScaNN
  re-ranks with: float32 holds 4 bytes per dimension per row in RAM, int8 a quarter of that.
  """

  kind = "scann"

  def __init__(self, *, num_leaves: int | None = None, leaves_to_search: int | None = None,
               training_sample_size: int | None = None, dimensions_per_block: int = 2,
               anisotropic_quantization_threshold: float = 0.2,
               reorder_num_neighbors: int | None = None, reorder_dtype: str = "float32",
               training_threads: int | None = None, search_threads: int | None = None,
               recall_k: int = 10, num_recall_queries: int = 1000,
               recall_query_noise: float = 0.5, recall_seed: int = 0):
    self.knobs = dict(num_leaves=num_leaves, leaves_to_search=leaves_to_search,
                      training_sample_size=training_sample_size,
                      dimensions_per_block=dimensions_per_block,
                      anisotropic_quantization_threshold=anisotropic_quantization_threshold,
                      reorder_num_neighbors=reorder_num_neighbors, reorder_dtype=reorder_dtype,
                      training_threads=training_threads, search_threads=search_threads)
    self.recall_k = recall_k
    self.num_recall_queries = num_recall_queries
    self.recall_query_noise = recall_query_noise
    self.recall_seed = recall_seed
    self.params: ScannParams | None = None
    self._embeddings = None
    self._searcher = None
    self.ids = None
    self.manifest = {}

  def build(self, embeddings, ids, *, manifest=None, held_out_queries=None):
    """Trains the searcher on `embeddings` (a memmap is read in place, not copied in Python).

    `held_out_queries` measure recall when given (real query-tower outputs are the honest
    test); otherwise `num_recall_queries` perturbed rows do (see `perturbed_queries`).
    """
    if embeddings.dtype != np.float32 or not embeddings.flags.c_contiguous:
      embeddings = np.ascontiguousarray(embeddings, np.float32)
    ids = np.asarray(ids, np.int64)
    if embeddings.ndim != 2 or ids.shape != (embeddings.shape[0],):
      raise ValueError(f"embeddings {embeddings.shape} and ids {ids.shape} do not match")
    params = resolve_params(embeddings.shape[0], k=self.recall_k, **self.knobs)
    start = time.perf_counter()
    builder = scann_ops_pybind.builder(embeddings, self.recall_k, "dot_product")
    if params.mode == "tree_ah":
      builder = builder.tree(
          params.num_leaves, params.leaves_to_search,
          training_sample_size=params.training_sample_size).score_ah(
              params.dimensions_per_block,
              anisotropic_quantization_threshold=params.anisotropic_quantization_threshold,
              training_sample_size=params.training_sample_size).reorder(
                  params.reorder_num_neighbors, quantize=REORDER_DTYPES[params.reorder_dtype])
    else:
      builder = builder.score_brute_force(quantize=REORDER_DTYPES[params.reorder_dtype])
    searcher = builder.set_n_training_threads(params.training_threads).build()
    build_seconds = time.perf_counter() - start
    self._install(searcher, params, embeddings, ids)

    start = time.perf_counter()
    if held_out_queries is not None:
      queries, source = np.asarray(held_out_queries, np.float32), "held_out"
    else:
      queries = perturbed_queries(embeddings, self.num_recall_queries,
                                  noise=self.recall_query_noise, seed=self.recall_seed)
      source = f"perturbed_rows(noise={self.recall_query_noise}, seed={self.recall_seed})"
    k = min(self.recall_k, embeddings.shape[0])
    _, exact_rows = exact_top_k(embeddings, queries, k)
    _, approx_rows = self._search_rows(queries, k)
    self.manifest = dict(manifest or {})
    self.manifest.update({
        "kind": self.kind, "num_blocks": int(embeddings.shape[0]),
        "dim": int(embeddings.shape[1]), "checksum": embeddings_checksum(embeddings),
        "scann": dataclasses.asdict(params),
        "index_build_seconds": round(build_seconds, 3),
        f"recall@{self.recall_k}": recall_at_k(approx_rows, exact_rows),
        "recall_k": k, "recall_queries": int(queries.shape[0]),
        "recall_query_source": source,
        "recall_seconds": round(time.perf_counter() - start, 3)})

  def _install(self, searcher, params: ScannParams, embeddings, ids) -> None:
    searcher.set_num_threads(params.search_threads)
    self._searcher, self.params = searcher, params
    self._embeddings, self.ids = embeddings, ids

  def _save_extra(self, folder: Path) -> None:
    scann_dir = folder / SEARCHER_DIR
    scann_dir.mkdir()
    self._searcher.serialize(str(scann_dir), relative_path=True)
    dataset = scann_dir / "dataset.npy"
    if not dataset.exists():
      return   # int8 / bfloat16 re-ranking keeps no float32 rows
    if np.load(dataset, mmap_mode="r").shape != self._embeddings.shape:
      raise RuntimeError(f"ScaNN stored rows of shape {np.load(dataset, mmap_mode='r').shape}"
                         f", expected {self._embeddings.shape}")
    link = scann_dir / ".dataset.npy.link"
    try:
      os.link(folder / "embeddings.npy", link)
    except OSError:
      return   # no hard links on this filesystem: keep ScaNN's own copy
    os.replace(link, dataset)

  @classmethod
  def _restore(cls, path, embeddings, ids, manifest):
    index = cls()
    try:
      params = ScannParams(**manifest["scann"])
    except (KeyError, TypeError) as e:
      raise InputError(f"missing or malformed ScaNN parameters ({e})",
                       path=path / "manifest.json", field="scann") from None
    params = dataclasses.replace(
        params, search_threads=int(index.knobs["search_threads"] or _cpus()))
    try:
      searcher = scann_ops_pybind.load_searcher(str(path / SEARCHER_DIR))
    except (RuntimeError, ValueError) as e:
      raise InputError(f"cannot load the ScaNN searcher: {e}", path=path / SEARCHER_DIR) from None
    index._install(searcher, params, embeddings, np.asarray(ids, np.int64))
    index.manifest = dict(manifest)
    return index

  @property
  def embeddings(self):
    return self._embeddings

  def _search_rows(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(scores, row numbers) of the top k <= num_blocks; every row is filled.

    A query whose searched leaves hold fewer than k rows gets ScaNN's padding (NaN scores);
    those queries are searched again over every leaf, so the result always has k real rows,
    as `ExactIndex` does.
    """
    scores, rows = self._scann_search(queries, k, self.params.leaves_to_search)
    short = np.isnan(scores).any(axis=1)
    if short.any():
      scores[short], rows[short] = self._scann_search(queries[short], k, self.params.num_leaves)
    return scores, rows

  def _scann_search(self, queries, k, leaves):
    p = self.params
    kwargs = {"final_num_neighbors": k}
    if p.mode == "tree_ah":
      kwargs.update(leaves_to_search=leaves,
                    pre_reorder_num_neighbors=max(p.reorder_num_neighbors, k))
    # ScaNN splits a batch into chunks of `batch_size` queries, one thread each.
    per_thread = math.ceil(queries.shape[0] / p.search_threads)
    if p.search_threads > 1 and queries.shape[0] > 1:
      rows, scores = self._searcher.search_batched_parallel(queries, batch_size=per_thread,
                                                            **kwargs)
    else:
      rows, scores = self._searcher.search_batched(queries, **kwargs)
    return np.array(scores, np.float32), np.array(rows, np.int64)

  def search(self, queries, k):
    if self._searcher is None:
      raise RuntimeError("search before build")
    k = min(int(k), self.num_blocks)
    queries = np.ascontiguousarray(queries, np.float32)
    if queries.shape[0] == 0 or k == 0:
      return np.zeros((queries.shape[0], k), np.float32), np.zeros((queries.shape[0], k),
                                                                   np.int64)
    scores, rows = self._search_rows(queries, k)
    return scores, self.ids[rows]
