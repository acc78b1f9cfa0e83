"""One exception type for bad user input, so the CLI can turn it into a clean message.

Every error about a file says which file, which line and which field, because the person
reading it is usually looking at a 13-million-line download, not at our code.
"""
from __future__ import annotations


def _describe(message: str, path: str | None, line: int | None, field: str | None) -> str:
  where = ""
  if path is not None:
    where = path + (f":{line}" if line is not None else "") + ": "
  if field is not None:
    where += f"field '{field}': "
  return where + message


class InputError(Exception):
  """Bad input from the user: a file, a flag or a config. The CLI exits non-zero on it."""

  def __init__(self, message: str, *, path=None, line: int | None = None,
               field: str | None = None):
    self.path = None if path is None else str(path)
    self.line = line
    self.field = field
    self.reason = message
    super().__init__(_describe(message, self.path, line, field))

  @property
  def message(self) -> str:
    """The message alone: raised inside a gin configurable, str() also carries gin's
    "In call to configurable ..." lines, which name our functions, not the user's input."""
    return _describe(self.reason, self.path, self.line, self.field)
