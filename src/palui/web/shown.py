"""Text from a model, a server or a sender as the web page shows it (spec §4.7).

The segments of :func:`palui.text.escape.segments` become HTML: text autoescaped, each run of
hidden characters a ``<span class="hidden-char">\\u202e</span>`` (a styled span that plain text
cannot imitate, and the escape text says which code points), a literal backslash doubled, a run
of spaces ``<span class="space-run">␠×N</span>``; a value with hidden characters is followed by
``<span class="hidden-note">contains hidden characters</span>``. The page's script renders
streamed events with the same rules (``static/hidden.js``, generated from the same table).

Every other ``{{ value }}`` of a template passes :func:`finalize`: plain escape text, safe in
attributes too, so a template that forgets the filter still shows no hidden character raw.
"""

from __future__ import annotations

import json
from typing import Any

from markupsafe import Markup, escape

from palui.text.display import hidden_in
from palui.text.escape import HIDDEN_NOTE, has_hidden, segments
from palui.text.escape import escape as text_escape

NOTE_HTML = Markup(' <span class="hidden-note">{}</span>').format(HIDDEN_NOTE)


def shown_html(value: Any, one_line: bool = False, note: bool = True) -> Markup:
    """``value`` (a string; anything else is shown as its ``str``) as HTML with hidden characters as
    styled escapes. ``one_line`` escapes line feeds and tabs too (list cells, buttons, headings)."""
    if value is None:
        return Markup("")
    text = value if isinstance(value, str) else str(value)
    parts: list[str] = []
    for kind, seg in segments(text, one_line=one_line):
        if kind == "text":
            parts.append(str(escape(seg)))
        elif kind == "escape":
            parts.append(f'<span class="hidden-char" title="hidden characters">{escape(seg)}</span>')
        elif kind == "space_run":
            parts.append(f'<span class="space-run" title="a run of spaces">{escape(seg)}</span>')
        else:  # a literal backslash, doubled: "\u202e" typed as text never looks like an escape
            parts.append(f'<span class="backslash">{escape(seg)}</span>')
    out = Markup("".join(parts))
    return out + NOTE_HTML if note and has_hidden(text) else out


def shown_one_line(value: Any) -> Markup:
    """:func:`shown_html` for one-line places."""
    return shown_html(value, one_line=True)


def json_html(value: Any, indent: int = 2) -> Markup:
    """A JSON-like value (a schema, annotations, arguments) indented, every string through
    :func:`shown_html`; marked once at the end when any string had hidden characters."""

    def walk(v: Any, depth: int) -> str:
        pad, end = "\n" + " " * (indent * (depth + 1)), "\n" + " " * (indent * depth)
        if isinstance(v, dict):
            if not v:
                return "{}"
            items = [f"{pad}{quoted(str(k))}: {walk(x, depth + 1)}" for k, x in sorted(v.items())]
            return "{" + ",".join(items) + end + "}"
        if isinstance(v, list):
            if not v:
                return "[]"
            return "[" + ",".join(f"{pad}{walk(x, depth + 1)}" for x in v) + end + "]"
        if isinstance(v, str):
            return quoted(v)
        return str(escape(json.dumps(v, allow_nan=False)))

    out = Markup(walk(value, 0))
    return out + NOTE_HTML if hidden_in(value) else out


def quoted(s: str) -> str:
    """A JSON string's display: quotes, the text through :func:`shown_html` (one line), ``"`` as ``\\"``."""
    inner = shown_html(s, one_line=True, note=False)
    return "&#34;" + str(inner).replace("&#34;", "\\&#34;") + "&#34;"


def finalize(value: Any) -> Any:
    """Jinja's ``finalize``: a plain string gets its hidden characters as escape text (safe in
    attributes); Markup (already rendered by a filter above) and other values pass unchanged."""
    if isinstance(value, str) and not isinstance(value, Markup) and has_hidden(value):
        return text_escape(value)
    return value
