"""Wikitext -> the plain paragraphs WikiExtractor would have given ORQA.

ORQA's blocks were cut from WikiExtractor's output, so the cleaning aims at what that tool
keeps by default: running text with link anchors, bold and italics unwrapped, section headings
as their own short paragraph ("History."), and without templates (infoboxes, citations,
navboxes), tables, references, file/category/interlanguage links, comments, list items and
magic words. The markup is parsed by mwparserfromhell (a maintained MediaWiki parser) rather
than by regular expressions, so nested templates and links inside image captions are removed
whole instead of leaving fragments. Templates are dropped, not expanded: WikiExtractor expands
a few ({{convert}}, {{lang}}) that we lose, which shortens some sentences.
"""
from __future__ import annotations

import html
import re

import mwparserfromhell
from mwparserfromhell import nodes

# Link namespaces whose target is not running text.
_DROPPED_LINK_PREFIXES = ("file", "image", "media", "category", "wikipedia", "wp", "template",
                          "help", "portal", "special", "draft", "module", "wikt", "wiktionary")
_INTERLANGUAGE = re.compile(r"^[a-z]{2,3}(-[a-z]+)?$")
# Tags whose contents are never running text.
_DROPPED_TAGS = {"ref", "references", "table", "gallery", "math", "chem", "timeline", "score",
                 "graph", "mapframe", "syntaxhighlight", "source", "pre", "code", "imagemap",
                 "noinclude", "includeonly", "templatedata", "nowiki", "hiero", "poem"}
_LIST_MARKERS = ("*", "#", ";")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_SPACES = re.compile(r"[ \t\u00a0]+")
_EMPTY_BRACKETS = re.compile(r"\(\s*[,;]?\s*\)")
# Disambiguation pages are marked by one of these templates (lower case, spaces for "_").
_DISAMBIGUATION_TEMPLATES = {"disambiguation", "disambig", "dab", "disamb", "hndis", "geodis",
                             "numberdis", "letter-numbercombdisambig", "mil-unit-dis",
                             "school disambiguation", "hospital disambiguation",
                             "place name disambiguation", "human name disambiguation"}


def _template_name(template: nodes.Template) -> str:
  return str(template.name).strip().lower().replace("_", " ")


def is_disambiguation(wikicode) -> bool:
  for template in wikicode.filter_templates(recursive=False):
    name = _template_name(template)
    if name in _DISAMBIGUATION_TEMPLATES or name.endswith(" disambiguation"):
      return True
  return False


def _link_text(link: nodes.Wikilink) -> str:
  target = str(link.title).strip()
  if ":" in target and not target.startswith(":"):
    prefix = target.split(":", 1)[0].strip().lower()
    if prefix in _DROPPED_LINK_PREFIXES or _INTERLANGUAGE.match(prefix):
      return ""
  if link.text is not None:
    return _render(link.text.nodes)
  return target.lstrip(":").split("#", 1)[0] if not target.startswith("#") else target[1:]


def _render(node_list) -> str:
  out = []
  for node in node_list:
    if isinstance(node, nodes.Text):
      out.append(node.value)
    elif isinstance(node, nodes.Wikilink):
      out.append(_link_text(node))
    elif isinstance(node, nodes.ExternalLink):
      out.append(_render(node.title.nodes) if node.title is not None else "")
    elif isinstance(node, nodes.HTMLEntity):
      out.append(node.normalize())
    elif isinstance(node, nodes.Heading):
      # Its own paragraph, with a full stop so the sentence splitter ends it there.
      title = _render(node.title.nodes).strip()
      out.append(f"\n\n\x00{title}.\n\n" if title else "\n\n")
    elif isinstance(node, nodes.Tag):
      tag = str(node.tag).strip().lower()
      if node.wiki_markup in _LIST_MARKERS or tag in ("li", "dt") and node.wiki_markup:
        out.append("\n\x01")   # the rest of this line is a list item, dropped below
      elif tag == "br":
        out.append(" ")
      elif tag in _DROPPED_TAGS or node.wiki_markup == "{|":
        continue
      elif node.contents is not None:
        out.append(_render(node.contents.nodes))
    # Templates, template arguments, comments and anything else carry no running text.
  return "".join(out)


def plain_paragraphs(text: str) -> list[str]:
  """Paragraphs of already-plain text (blank-line separated), whitespace collapsed; lines
  marked as list items (\\x01) are dropped, heading paragraphs (\\x00) kept only when text
  follows them before the next heading."""
  text = html.unescape(_MAGIC_WORD.sub("", text))
  kept: list[tuple[bool, str]] = []
  for block in re.split(r"\n\s*\n", text):
    lines = [line for line in block.split("\n") if not line.lstrip().startswith("\x01")]
    para = _SPACES.sub(" ", " ".join(line.strip() for line in lines)).strip()
    para = _EMPTY_BRACKETS.sub("", para).replace(" ,", ",").replace(" .", ".").strip()
    heading = para.startswith("\x00")
    para = para.lstrip("\x00").strip()
    if para and para != ".":
      kept.append((heading, para))
  out = []
  for i, (heading, para) in enumerate(kept):
    if heading and (i + 1 == len(kept) or kept[i + 1][0]):
      continue
    out.append(para)
  return out


def clean(wikitext: str) -> tuple[list[str], bool]:
  """(paragraphs, whether the page is a disambiguation page) of one page's wikitext."""
  code = mwparserfromhell.parse(wikitext)
  return plain_paragraphs(_render(code.nodes)), is_disambiguation(code)
