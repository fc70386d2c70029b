"""Text from a model, a server or a sender as a terminal, a notification or a chat message shows it.

Every such surface goes through these (spec §4.7): strings through
:func:`palui.text.escape.escape`, structured values (a call's arguments, a schema) as JSON
whose strings are escaped the same way, and a value that has hidden characters is marked
``(contains hidden characters)``. HTML has its own rendering of the same segments (styled
spans: :mod:`palui.web.base`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from palui.text.escape import HIDDEN_NOTE, TRAILING_SPACES, escape, has_hidden
from palui.text.strict_json import NON_FINITE

NOTE = f" ({HIDDEN_NOTE})"


def hidden_in(value: Any) -> bool:
    """Does any string in ``value`` (a str, or JSON-like dicts and lists, keys included) have hidden characters?"""
    if isinstance(value, str):
        return has_hidden(value)
    if isinstance(value, dict):
        return any(hidden_in(k) or hidden_in(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(hidden_in(v) for v in value)
    return False


def shown(text: str | None, *, one_line: bool = False, note: bool = True) -> str:
    """``text`` escaped; with ``note``, `` (contains hidden characters)`` appended when it had any.
    ``one_line`` also escapes line feeds and tabs (list cells, buttons, one-line summaries)."""
    if not text:
        return text or ""
    out = escape(text, one_line=one_line)
    return out + NOTE if note and has_hidden(text) else out


def named(value: str, limit: int = 80) -> str:
    """A name the person gave, as a message echoes it: quoted, escaped on one line (spec §4.7), and cut to
    ``limit`` characters with its length when longer (``'aaaa…' (100,000 characters)``), so a mistaken
    paste is not printed back whole."""
    if len(value) <= limit:
        return f"'{escape(value, one_line=True)}'"
    return f"'{escape(value[:limit], one_line=True)}…' ({len(value):,} characters)"


def _json_string(s: str, one_line: bool) -> str:
    body = escape(s, one_line=one_line).replace('"', '\\"')
    return f'"{body}"'


def shown_json(value: Any, *, indent: int | None = None, sort_keys: bool = False, note: bool = True) -> str:
    """``value`` as JSON whose strings are escaped by :func:`escape` (one-line: ``\\n`` inside a
    string stays ``\\n``); numbers, booleans and null as JSON writes them. Marked when any string
    had hidden characters. This is a display, not JSON to parse: ``\\U000e0020`` is not JSON."""

    def walk(v: Any, depth: int) -> str:
        pad = "" if indent is None else "\n" + " " * (indent * (depth + 1))
        end = "" if indent is None else "\n" + " " * (indent * depth)
        sep = ", " if indent is None else ","
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = sorted(v.items()) if sort_keys else list(v.items())
            inner = sep.join(f"{pad}{_json_string(str(k), True)}: {walk(x, depth + 1)}" for k, x in items)
            return "{" + inner + end + "}"
        if isinstance(v, (list, tuple)):
            if not v:
                return "[]"
            return "[" + sep.join(f"{pad}{walk(x, depth + 1)}" for x in v) + end + "]"
        if isinstance(v, str):
            return _json_string(v, True)
        if isinstance(v, float) and not math.isfinite(v):  # a display: NaN and Infinity as their names
            return NON_FINITE[repr(v)]
        return json.dumps(v, ensure_ascii=False, allow_nan=False)

    out = walk(value, 0)
    return out + NOTE if note and hidden_in(value) else out


def json_safe(value: Any) -> str:
    """``value`` as real JSON (``--json`` output) in which every hidden character is a JSON ``\\u``
    escape (surrogate pairs above the BMP), so a terminal never renders one raw; other
    non-ASCII text stays readable. ``json.loads`` gives back exactly ``value``."""
    text = json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False)
    if not has_hidden(text):
        return text
    out = []
    for ch in text:
        if has_hidden(ch):
            out.append(json.dumps(ch, allow_nan=False)[1:-1])  # ensure_ascii: \u202e, or a surrogate pair above the BMP
        else:
            out.append(ch)
    return "".join(out)


class StreamShown:
    """Streamed text shown piece by piece, exactly as :func:`shown` shows the whole
    (docs/decisions/0117-whitespace-runs-in-streamed-text.md).

    Escaping works per code point, so each piece can be shown as it arrives, except a run of
    space separators, which becomes ``␠×N`` only when it is 8 or longer: a run at the end of
    what arrived so far is held back until the run is complete (the next piece, or :meth:`end`).
    ``"".join(feed(p) for p in pieces) + end() == shown("".join(pieces))``.
    """

    def __init__(self) -> None:
        self._held = ""
        self._hidden = False
        self.text = ""  #: everything fed so far, raw

    def feed(self, piece: str) -> str:
        """The display text that ``piece`` completes (possibly empty)."""
        self.text += piece
        self._hidden = self._hidden or has_hidden(piece)
        pending = self._held + piece
        m = TRAILING_SPACES.search(pending)
        cut = m.start() if m else len(pending)
        self._held = pending[cut:]
        return escape(pending[:cut])

    def end(self) -> str:
        """The rest, with `` (contains hidden characters)`` when any piece had one."""
        rest, self._held = escape(self._held) if self._held else "", ""
        return rest + (NOTE if self._hidden else "")
