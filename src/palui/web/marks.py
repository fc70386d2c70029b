"""An approval's marks on the web page (spec §4.6): what came from untrusted content, highlighted in the
call's exact arguments.

A mark of :func:`palui.policy.taint.untrusted_args` names an argument's ``path``, its ``value`` (a number as
its JSON text) and the ``spans`` of it found in untrusted content (``[value]`` when found whole). The page
highlights exactly those: a value found whole, string or number, is wrapped whole; a longer string only at
its spans, so the person sees which words came from where (the terminal and chat channels quote the same
spans, :func:`palui.text.prompts.mark_line`). Every piece of text goes through
:func:`palui.web.shown.shown_html`, escaped and with hidden characters shown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import escape

from palui.web.shown import shown_html

#: (start, end, sources) of a highlighted piece of a string value, in characters of the value.
Piece = tuple[int, int, list[str]]


def by_path(marks: Sequence[Mapping[str, Any]] | None) -> dict[str, list[Mapping[str, Any]]]:
    """The marks of each argument path (a value can have marks from several sources)."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for m in marks or []:
        out.setdefault(str(m.get("path")), []).append(m)
    return out


def is_whole(m: Mapping[str, Any]) -> bool:
    """Whether the mark is of the whole value (also a mark stored before spans were)."""
    spans = m.get("spans")
    return not spans or list(spans) == [m.get("value")]


def pieces(value: str, marks: Sequence[Mapping[str, Any]]) -> list[Piece]:
    """Where the marks' spans stand in ``value``, left to right, overlapping ones merged with their sources.
    Each mark's spans are found in order (a span repeated in the value is the one after the previous span)."""
    found: list[Piece] = []
    for m in marks:
        at = 0
        for span in m.get("spans") or []:
            i = value.find(span, at) if span else -1
            if i < 0:
                i = value.find(span) if span else -1
            if i < 0:
                continue
            found.append((i, i + len(span), [str(m.get("source", ""))]))
            at = i + len(span)
    found.sort()
    merged: list[Piece] = []
    for start, end, sources in found:
        if merged and start <= merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2] + [s for s in sources if s not in last[2]])
        else:
            merged.append((start, end, sources))
    return merged


def _inner(text: str) -> str:
    """A piece of a JSON string's display: :func:`shown_html` on one line, ``"`` as ``\\"``."""
    return str(shown_html(text, one_line=True, note=False)).replace("&#34;", "\\&#34;")


def _mark(html: str, sources: Sequence[str]) -> str:
    return f'<mark class="untrusted" title="from untrusted content: {escape(", ".join(sources))}">{html}</mark>'


def marked_value(value: Any, text: str, marks: Sequence[Mapping[str, Any]]) -> str:
    """The HTML of one argument value (``text``: its display, already escaped) with its marks: the whole value
    when a mark is of it whole, else each span of a string, then where it came from."""
    sources = list(dict.fromkeys(str(m.get("source", "")) for m in marks))
    after = f'<span class="untrusted-src"> ← from {escape(", ".join(sources))}</span>'
    if any(is_whole(m) for m in marks) or not isinstance(value, str):
        return _mark(text, sources) + after
    found = pieces(value, marks)
    if not found:  # a span the value no longer holds: say so of the whole value rather than nothing
        return _mark(text, sources) + after
    out, at = ["&#34;"], 0
    for start, end, srcs in found:
        out.append(_inner(value[at:start]))
        out.append(_mark(_inner(value[start:end]), srcs))
        at = end
    out += [_inner(value[at:]), "&#34;"]
    return "".join(out) + after
