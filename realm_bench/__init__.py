"""realm-bench: a gin-configured benchmarking harness for REALM."""
