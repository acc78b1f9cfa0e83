"""Test-session settings.

The tests compile many tiny programs and run each a few times, so XLA's optimiser costs more
than it saves: compile them unoptimised. Subprocess tests that set XLA_FLAGS keep their own.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(autouse=True)
def _no_gin_config_from_other_tests():
  """Gin's config is process-global: a test that parsed run files must not bind the defaults
  of configurables another test constructs by hand."""
  gin.clear_config()
  yield
