"""seqio tasks for realm-bench, installed as `realm_bench.tasks`.

From Python, without gin: `realm_bench.tasks.configure(world_dir=..., data_dir=...,
vocab_path=...)` sets where the tasks read from and registers them; then
`seqio.get_mixture_or_task("realm_bench.synthetic.nq_open").get_dataset(...)` as usual.
"""
from realm_bench.tasks.api import configure  # noqa: F401
