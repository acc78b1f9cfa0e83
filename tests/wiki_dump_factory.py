"""A small Wikipedia dump in the real MediaWiki export format, for the `blocks` tests.

The pages cover what the pipeline must tell apart: articles with infobox and citation
templates, piped and plain links, file and category links, a table, references, headings and
lists; a redirect, a title disambiguation page, a template-marked disambiguation page, a
"List of" page and a talk page, none of which may give a block; and one long article that must
be cut into several blocks.
"""
from __future__ import annotations

import bz2
import json
from pathlib import Path
from xml.sax.saxutils import escape

HEADER = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <dbname>enwiki</dbname>
    <namespaces>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
    </namespaces>
  </siteinfo>
"""

PARIS = """{{Short description|Capital of France}}
{{Infobox settlement
| name = Paris
| population_total = 2,165,423
| image = [[File:Paris skyline.jpg|thumb|The [[Eiffel Tower]]]]
}}
'''Paris''' is the [[capital city|capital]] and most populous city of [[France]].<ref>{{cite web|url=http://example.org|title=Population}}</ref> The city was founded in the 3rd century BC by the [[Parisii]].

== History ==
On 14 July 1789 the [[Bastille]] was stormed. Dr. Guillotin spoke at the Assembly of the [[National Assembly (France)|National Assembly]] in July 1789.
{| class="wikitable"
|-
! Year !! Population
|-
| 1901 || 2,714,068
|}
* a list item that WikiExtractor drops
* another list item

== See also ==
* [[Outline of France]]

[[Category:Capitals in Europe]]
[[de:Paris]]
"""

LONG_SENTENCE = ("The river Seine flows through the Bank of England district of the old town "
                 "on its way to the sea")


def long_article() -> str:
  sentences = [f"Sentence number {i} says that the Seine was crossed by Charles de Gaulle in "
               f"{1900 + i}." for i in range(40)]
  # One sentence longer than any block, so it must be cut at word starts.
  sentences.append(" ".join([LONG_SENTENCE] * 12) + ".")
  return " ".join(sentences)


PAGES = [
    ("Paris", 0, None, PARIS),
    ("Paris (disambiguation)", 0, None, "'''Paris''' may refer to:\n* [[Paris]], France\n"),
    ("Mercury", 0, None, "'''Mercury''' may mean:\n* [[Mercury (planet)]]\n{{disambiguation}}\n"),
    ("List of cities in France", 0, None, "This is a list of cities. Lyon is one."),
    ("City of Light", 0, "Paris", "#REDIRECT [[Paris]]"),
    ("Talk:Paris", 1, None, "Is Paris a city? Yes, Paris is a city."),
    ("Seine", 0, None, long_article()),
    ("Empty", 0, None, "{{stub}}"),
]


def page_xml(title: str, ns: int, redirect: str | None, text: str, page_id: int) -> str:
  redirect_tag = f'    <redirect title="{escape(redirect)}" />\n' if redirect else ""
  return (f"  <page>\n    <title>{escape(title)}</title>\n    <ns>{ns}</ns>\n"
          f"    <id>{page_id}</id>\n{redirect_tag}    <revision>\n      <id>{page_id * 10}</id>\n"
          f"      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
          f'      <text bytes="{len(text.encode())}" xml:space="preserve">{escape(text)}</text>\n'
          f"    </revision>\n  </page>\n")


def dump_text(pages=PAGES) -> str:
  body = "".join(page_xml(*page, page_id=i + 1) for i, page in enumerate(pages))
  return HEADER + body + "</mediawiki>\n"


def write_dump(path: Path, pages=PAGES) -> Path:
  """`path` (…-pages-articles.xml.bz2), bz2-compressed as the dumps are."""
  path.write_bytes(bz2.compress(dump_text(pages).encode("utf-8")))
  return path


EXTRACTED = [
    {"id": "100", "url": "https://en.wikipedia.org/wiki?curid=100", "title": "Lyon",
     "text": "Lyon is a city in France on the Rh&ocirc;ne. It was founded on 9 October 43 BC "
             "by Lucius Munatius Plancus."},
    {"id": "101", "url": "https://en.wikipedia.org/wiki?curid=101",
     "title": "Index of France-related articles", "text": "An index. France is a country."},
]


def write_extracted(path: Path, rows=EXTRACTED) -> Path:
  """WikiExtractor `--json` output (what ORQA's preprocessing reads)."""
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return path


def plain_text() -> str:
  """Text to learn a test vocabulary from (the words of every page)."""
  return "\n".join([text for *_, text in PAGES] + [r["text"] for r in EXTRACTED])
