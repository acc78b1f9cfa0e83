"""seqio tasks for realm-bench, installed as `realm_bench.tasks`."""
