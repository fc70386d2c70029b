"""Readable text from fetched bytes: HTML to text with the standard library (spec §7).

:func:`html_to_text` keeps the title and the text a reader would see, drops
``script``/``style``/``noscript``/``template``/``svg`` and similar, breaks lines at
block elements and collapses runs of whitespace. :func:`decode` picks the character
set (header, then ``<meta charset>``, then UTF-8) and never fails.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

# Content a browser never shows as text.
_SKIP = {"script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "object", "embed",
         "select", "datalist"}
# Elements that start a new line of text.
_BLOCK = {"address", "article", "aside", "blockquote", "br", "dd", "details", "dialog", "div", "dl", "dt",
          "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
          "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td", "th",
          "thead", "tfoot", "tr", "ul", "title", "caption", "option"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.in_title = False
        self.title: list[str] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self.skip += 1
        elif tag == "title" and not self.skip:
            self.in_title = True
        if tag in _BLOCK:
            self.parts.append("\n")
            if tag == "li" and not self.skip:
                self.parts.append("- ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <br/>, <svg/>: a self-closed element opens nothing, so it must not count as skipped.
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self.skip:
            self.skip -= 1
        elif tag == "title":
            self.in_title = False
        if tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        if self.in_title:
            self.title.append(data)
        else:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str | None, str]:
    """(title or None, visible text) of an HTML document; lines joined with ``\\n``, no blank runs."""
    p = _TextParser()
    try:
        p.feed(html)
        p.close()
    except Exception:  # html.parser is lenient, but a parser bug must not lose the page: keep what was read
        pass
    title = _SPACE.sub(" ", "".join(p.title)).strip() or None
    return title, collapse("".join(p.parts))


def collapse(text: str) -> str:
    """Collapse whitespace inside each line, drop empty lines."""
    lines = (_SPACE.sub(" ", line).strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def decode(body: bytes, charset: str | None, html: bool) -> str:
    """Bytes to text: the header's charset, else (HTML) a ``<meta charset>``, else UTF-8; bad bytes replaced."""
    for name in (charset, _meta_charset(body) if html else None, "utf-8"):
        if not name:
            continue
        try:
            codecs.lookup(name)
        except LookupError:
            continue
        return body.decode(name, errors="replace")
    return body.decode("utf-8", errors="replace")


def _meta_charset(body: bytes) -> str | None:
    m = _META_CHARSET.search(body[:4096])
    return m.group(1).decode("ascii") if m else None


def looks_like_html(body: bytes) -> bool:
    """True when untyped bytes start like an HTML document."""
    head = body[:512].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<body" in head


def is_text(body: bytes) -> bool:
    """True when untyped bytes decode as UTF-8 and hold no NUL bytes (not binary)."""
    sample = body[:8192]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        # A multi-byte character cut at the sample's end is still text.
        return e.start >= len(sample) - 3
    return True
