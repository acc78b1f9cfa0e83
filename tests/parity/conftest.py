"""The parity tests' report: the largest relative error of each compared quantity, printed at
the end of the run (`make test-parity`)."""
import pytest

_ERRORS = pytest.StashKey[dict]()


@pytest.fixture(scope="session")
def parity_errors(pytestconfig):
  """{quantity: max |ours - HF| / max |HF|}; tests record what they measure here."""
  return pytestconfig.stash.setdefault(_ERRORS, {})


def pytest_terminal_summary(terminalreporter, config):
  errors = config.stash.get(_ERRORS, {})
  if not errors:
    return
  terminalreporter.write_sep("-", "parity with Hugging Face REALM: max |ours - HF| / max |HF|")
  for name, value in sorted(errors.items()):
    terminalreporter.write_line(f"{name:<44} {value:.2e}")
