"""Test-session settings.

The tests compile many tiny programs and run each a few times, so XLA's optimiser costs more
than it saves: compile them unoptimised. Subprocess tests that set XLA_FLAGS keep their own.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


def pytest_ignore_collect(collection_path, config):
  """tests/parity imports torch and transformers (the `parity` extra): collected only when
  selected (`-m parity`), so the default run neither needs nor loads them."""
  if collection_path.name == "parity" and collection_path.parent.name == "tests":
    expr = (config.getoption("markexpr") or "").replace("not parity", "")
    if "parity" not in expr:
      return True
  return None


@pytest.fixture(autouse=True)
def _no_gin_config_from_other_tests():
  """Gin's config is process-global: a test that parsed run files must not bind the defaults
  of configurables another test constructs by hand."""
  gin.clear_config()
  yield


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  """A tiny synthetic world and its vocabulary, one per test module, with a persistent
  compilation cache so the module's runs and their resumed twins compile once."""
  import jax  # pylint: disable=g-import-not-at-top
  from realm_bench import gin_utils  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import vocab as vocab_lib  # pylint: disable=g-import-not-at-top
  from realm_bench.tasks import world as world_lib  # pylint: disable=g-import-not-at-top
  root = tmp_path_factory.mktemp("world")
  jax.config.update("jax_compilation_cache_dir", str(root / "jax_cache"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  gin_utils.parse_gin(["world/tiny.gin"], [])
  world_lib.generate(out_dir=root / "world", config=world_lib.WorldConfig())
  vocab_lib.learn_vocabulary(texts=vocab_lib.texts_from_world(root / "world"), size=500,
                             out=root / "vocab.txt")
  yield root
  jax.config.update("jax_compilation_cache_dir", None)


# --- the bad-input census (issue: every bad input a clean error) -------------------------
# With REALM_BENCH_BAD_INPUTS=FILE, every InputError the suite provokes in this process is
# noted with the test that provoked it, and FILE gets, per passing test case, the distinct
# messages: how many bad inputs the suite tries, and whether each names its file, line or
# field. Errors raised in the CLI subprocesses some tests start are not seen: a lower bound.
_CENSUS_FILE = os.environ.get("REALM_BENCH_BAD_INPUTS")
_census: dict = {}
_current_test: list = [None]


if _CENSUS_FILE:
  from realm_bench import errors as _errors  # pylint: disable=g-import-not-at-top,wrong-import-position

  _original_init = _errors.InputError.__init__

  def _noting_init(self, message, **kwargs):
    _original_init(self, message, **kwargs)
    if _current_test[0] is not None:
      _census.setdefault(_current_test[0], {"passed": False, "errors": {}})["errors"][
          str(self.message)] = {k: kwargs.get(k) is not None for k in ("path", "line", "field")}

  _errors.InputError.__init__ = _noting_init

  def pytest_runtest_setup(item):
    _current_test[0] = item.nodeid

  def pytest_runtest_logreport(report):
    if report.when == "call" and report.nodeid in _census:
      _census[report.nodeid]["passed"] = report.passed

  def pytest_sessionfinish(session):
    del session
    import json  # pylint: disable=g-import-not-at-top
    from realm_bench.io_utils import atomic_write_text  # pylint: disable=g-import-not-at-top
    cases = {k: v for k, v in sorted(_census.items()) if v["passed"]}
    messages = [m for v in cases.values() for m in v["errors"].values()]
    summary = {"test_cases": len(cases), "distinct_messages": len(messages),
               "naming_a_file": sum(m["path"] for m in messages),
               "naming_a_line": sum(m["line"] for m in messages),
               "naming_a_field": sum(m["field"] for m in messages),
               "naming_none": sum(not any(m.values()) for m in messages)}
    atomic_write_text(_CENSUS_FILE, json.dumps({"summary": summary, "cases": cases},
                                               indent=1, default=str) + "\n")
