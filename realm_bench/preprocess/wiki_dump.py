"""Pages out of a Wikipedia dump, and which of them become blocks.

Two input formats, because researchers hold one or the other:

- the MediaWiki XML export (`enwiki-*-pages-articles*.xml[.bz2]`), read with expat as a stream
  so a 70 GB file never sits in memory and a malformed page is reported with its line;
- WikiExtractor's `--json` output (one {"title", "text", ...} object per line, text already
  cleaned), which is what ORQA's `preprocess_wiki_extractor.py` reads.

Which pages are kept follows ORQA's `wiki_preprocessor.py`: titles "List of ...", "Index of
...", "Outline of ..." and any title holding "(disambiguation)" are dropped. WikiExtractor had
already dropped redirects and non-article namespaces before ORQA saw the pages; reading the XML
ourselves we do the same (namespace 0 only, no <redirect>), and we also drop pages that carry a
disambiguation template, which WikiExtractor kept whenever the title did not say
"(disambiguation)" (e.g. "Mercury" disambiguation pages under other titles).
"""
from __future__ import annotations

import dataclasses
import html
import json
import re
from typing import BinaryIO, Iterator
from xml.parsers import expat

from realm_bench.errors import InputError

# ORQA's remove_doc(): re.match, so anchored at the start of the title.
_ORQA_DROPPED_TITLE = re.compile(r"(List of .+)|(Index of .+)|(Outline of .+)|"
                                 r"(.*\(disambiguation\).*)")
_CHUNK = 1 << 20


@dataclasses.dataclass(frozen=True)
class Page:
  title: str
  text: str
  # "wikitext" (from the XML, still to be cleaned) or "plain" (WikiExtractor's, cleaned).
  markup: str
  line: int
  namespace: int = 0
  redirect: bool = False


def orqa_drops_title(title: str) -> bool:
  return _ORQA_DROPPED_TITLE.match(title) is not None


def skip_reason(page: Page) -> str | None:
  """Why `page` yields no blocks (a manifest counter name), or None to keep it."""
  if page.namespace != 0:
    return "not_an_article"
  if page.redirect:
    return "redirect"
  if orqa_drops_title(page.title):
    return "list_index_outline_or_disambiguation_title"
  return None


def iter_xml_pages(stream: BinaryIO, *, path: str) -> Iterator[Page]:
  """Every <page> of a MediaWiki export, with the line its <page> tag opened on."""
  parser = expat.ParserCreate()
  ready: list[Page] = []
  state = {"depth": 0, "stack": [], "page": None, "buf": None}

  def start(name, attrs):
    stack = state["stack"]
    stack.append(name)
    if name == "page":
      state["page"] = {"line": parser.CurrentLineNumber, "title": None, "ns": None,
                       "redirect": False, "text": None}
    elif state["page"] is not None:
      if name == "redirect":
        state["page"]["redirect"] = True
      elif name in ("title", "ns") and len(stack) == 3 or name == "text":
        state["buf"] = []

  def end(name):
    stack = state["stack"]
    stack.pop()
    page = state["page"]
    if page is None:
      return
    if state["buf"] is not None and name in ("title", "ns", "text"):
      value = "".join(state["buf"])
      state["buf"] = None
      if name == "text":
        page["text"] = value   # the last revision's text wins (pages-articles holds one)
      else:
        page[name] = value
    elif name == "page":
      ready.append(_finish(page, path))
      state["page"] = None

  def chars(data):
    if state["buf"] is not None:
      state["buf"].append(data)

  parser.StartElementHandler = start
  parser.EndElementHandler = end
  parser.CharacterDataHandler = chars
  parser.buffer_text = True
  try:
    while True:
      chunk = stream.read(_CHUNK)
      parser.Parse(chunk, not chunk)
      yield from ready
      ready.clear()
      if not chunk:
        break
  except expat.ExpatError as e:
    raise InputError(f"not well-formed MediaWiki XML ({expat.ErrorString(e.code)}, column "
                     f"{e.offset + 1})", path=path, line=e.lineno) from None
  except (OSError, EOFError) as e:   # a truncated or corrupt .bz2 / .gz
    raise InputError(f"cannot be read to the end ({e}); the download may be incomplete",
                     path=path) from None


def _finish(page: dict, path: str) -> Page:
  line = page["line"]
  if page["title"] is None or not page["title"].strip():
    raise InputError("a <page> without a <title>", path=path, line=line, field="title")
  if page["ns"] is None:
    raise InputError("a <page> without an <ns> (export format 0.6 or later is needed)",
                     path=path, line=line, field="ns")
  try:
    namespace = int(page["ns"])
  except ValueError:
    raise InputError(f"expected an integer namespace, got {page['ns']!r}", path=path,
                     line=line, field="ns") from None
  return Page(title=page["title"].strip(), text=page["text"] or "", markup="wikitext",
              line=line, namespace=namespace, redirect=page["redirect"])


def iter_jsonl_pages(stream: BinaryIO, *, path: str) -> Iterator[Page]:
  """WikiExtractor `--json` lines; text is HTML-unescaped as ORQA does."""
  for lineno, raw in enumerate(stream, start=1):
    try:
      line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
      raise InputError(f"not UTF-8 text ({e.reason} at column {e.start + 1})", path=path,
                       line=lineno) from None
    if not line.strip():
      continue
    try:
      obj = json.loads(line)
    except ValueError as e:
      raise InputError(f"not valid JSON ({e})", path=path, line=lineno) from None
    if not isinstance(obj, dict):
      raise InputError("expected a JSON object", path=path, line=lineno)
    for key in ("title", "text"):
      if not isinstance(obj.get(key), str):
        raise InputError("missing" if key not in obj else
                         f"expected a string, got {type(obj[key]).__name__}",
                         path=path, line=lineno, field=key)
    yield Page(title=obj["title"].strip(), text=html.unescape(obj["text"]), markup="plain",
               line=lineno)


def input_format(path: str) -> str:
  """"xml" or "jsonl", from the file name (compression suffixes aside)."""
  name = re.sub(r"\.(bz2|gz|zst)$", "", path.rsplit("/", 1)[-1])
  if name.endswith(".xml"):
    return "xml"
  if name.endswith((".jsonl", ".json")) or re.fullmatch(r"wiki_\d+", name):
    return "jsonl"
  raise InputError("cannot tell the format from the name: expected a MediaWiki export "
                   "(*.xml, *.xml.bz2) or WikiExtractor JSON lines (*.jsonl, *.json, wiki_NN)",
                   path=path)
