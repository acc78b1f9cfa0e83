"""TensorFlow (the input pipeline) is kept off the accelerators and quiet on CPU machines."""
from __future__ import annotations

import pytest

from realm_bench import tf_runtime


@pytest.mark.parametrize("gpu, level", [(False, "3"), (True, "2")])
def test_quiet_logs_hides_cuda_noise_only_without_a_gpu(monkeypatch, gpu, level):
  monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
  monkeypatch.setattr(tf_runtime, "has_gpu_driver", lambda: gpu)
  tf_runtime.quiet_logs()
  assert tf_runtime.os.environ["TF_CPP_MIN_LOG_LEVEL"] == level
  monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")   # the user's own choice wins
  tf_runtime.quiet_logs()
  assert tf_runtime.os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"


class _FakeConfig:
  def __init__(self, initialised=False):
    self.calls, self.initialised = [], initialised

  def set_visible_devices(self, devices, kind):
    if self.initialised:
      raise RuntimeError("Visible devices cannot be modified after being initialized")
    self.calls.append((devices, kind))


class _FakeTf:
  def __init__(self, **kwargs):
    self.config = _FakeConfig(**kwargs)


def test_tensorflow_is_shown_no_gpu():
  tf = _FakeTf()
  tf_runtime.keep_off_accelerators(tf)
  assert tf.config.calls == [([], "GPU")]
  tf_runtime.keep_off_accelerators(_FakeTf(initialised=True))  # too late: not an error


def test_the_real_module_comes_configured():
  tf = tf_runtime.tf
  assert tf.config.get_visible_devices("GPU") == []


def test_importing_the_package_quiets_tensorflow_first():
  import os  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
  out = subprocess.run([sys.executable, "-c", "import os, realm_bench; "
                        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])"], env=env, check=True,
                       capture_output=True, text=True, timeout=60).stdout.strip()
  assert out == ("2" if tf_runtime.has_gpu_driver() else "3")
