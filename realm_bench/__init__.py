"""realm-bench: a gin-configured benchmarking harness for REALM."""
# Before any submodule (or seqio) imports TensorFlow, whose C++ logging reads this at load.
from realm_bench import tf_runtime as _tf_runtime

_tf_runtime.quiet_logs()
