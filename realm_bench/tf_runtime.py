"""TensorFlow as this project uses it: the input pipeline only (seqio, tf.data, tf-text).

JAX owns the accelerators. TensorFlow, left alone, claims every GPU's memory as soon as it
initialises, so (as t5x does) it is shown no GPU: `from realm_bench.tf_runtime import tf`
gives the module with `tf.config.set_visible_devices([], "GPU")` applied. On a machine without
an NVIDIA driver, TensorFlow's C++ start-up still logs CUDA errors ("failed call to cuInit")
that mean nothing there; `quiet_logs` silences them unless TF_CPP_MIN_LOG_LEVEL is set.
Importing this module is cheap: TensorFlow loads on first use of `tf`.
"""
from __future__ import annotations

import glob
import os


def has_gpu_driver() -> bool:
  return os.path.exists("/proc/driver/nvidia") or bool(glob.glob("/dev/nvidia[0-9]*"))


def quiet_logs() -> None:
  """INFO and WARNING always hidden; ERROR too where there is no GPU for CUDA to complain of."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if has_gpu_driver() else "3")


def keep_off_accelerators(tf) -> None:
  try:
    tf.config.set_visible_devices([], "GPU")
  except RuntimeError:   # TensorFlow's devices were initialised already, by other code
    pass


def __getattr__(name: str):
  if name != "tf":
    raise AttributeError(name)
  quiet_logs()
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  keep_off_accelerators(tf)
  globals()["tf"] = tf
  return tf
