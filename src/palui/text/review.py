"""What a tool's pending review changes: diffs of the held definition against the accepted one (spec §7).

Pure functions over the ``review_json`` a flagged tool holds (see
:func:`palui.connectors.registry._apply_mcp_change`)::

    {"kind": "changed" | "loosened" | "tightened", "description", "input_schema", "annotations",
     "definition_hash", "previous": {"description", "input_schema", "annotations"},
     "was_enabled"?, "previous_user_class"?}

One rendering for every front end: ``palui tools show`` / ``review`` print the unified
diffs, the connector sheet shows the same lines with :func:`review_view`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from palui.text.escape import escape

if TYPE_CHECKING:
    from palui.results import ReviewChange

# (review key, title) in the order the parts are shown.
FIELDS = (("description", "description"), ("input_schema", "input schema"), ("annotations", "annotations"))


def visible(text: str) -> str:
    """``text`` through the one escaper (:func:`palui.text.escape.escape`): hidden characters as
    ``\\u202e`` / ``\\U000e0020`` escapes, a literal backslash as ``\\\\``.

    A server's text reaches the person's terminal: an escape sequence could erase or rewrite the
    diff lines above it, a bidi override could reorder what is read. Shown escaped, they are seen.
    """
    return escape(text)


def value_lines(value: Any) -> list[str]:
    """A value as lines for a diff: text as it is, anything else as indented JSON with sorted keys.

    Split on newlines only, so a carriage return or line separator stays inside its line
    (and :func:`visible` shows it) instead of hiding a change as a line break.
    """
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True,
                                                           allow_nan=False)
    return text.split("\n")


def diff_lines(old: Any, new: Any) -> list[tuple[str, str]]:
    """A full line diff of two values: ``[(kind, line)]`` with kind ``"-"``, ``"+"`` or ``" "``; empty when equal."""
    a, b = value_lines(old), value_lines(new)
    if a == b:
        return []
    import difflib  # only where a review shows a diff (docs/decisions/0085-a-light-cli-start.md)

    return [(line[0], line[2:]) for line in difflib.ndiff(a, b) if line.startswith(("- ", "+ ", "  "))]


def unified_diff(old: Any, new: Any, title: str, context: int = 3) -> str:
    """A unified diff (``--- previous TITLE`` / ``+++ new TITLE``) of two values, every line passed
    through :func:`visible` (it is for a terminal); "" when equal."""
    raw_a, raw_b = value_lines(old), value_lines(new)
    if raw_a == raw_b:
        return ""
    a, b = [visible(x) for x in raw_a], [visible(x) for x in raw_b]
    if a == b:
        # Only a control character was swapped for its escape text (or back): show every line fully escaped.
        a = [json.dumps(x, allow_nan=False)[1:-1] for x in raw_a]
        b = [json.dumps(x, allow_nan=False)[1:-1] for x in raw_b]
    import difflib

    return "\n".join(difflib.unified_diff(a, b, f"previous {title}", f"new {title}", lineterm="", n=context))


def review_fingerprint(review_json: str | None) -> str | None:
    """SHA-256 hex of the stored ``review_json`` text: names exactly the pending change a person saw."""
    import hashlib  # not on every CLI start (docs/decisions/0085-a-light-cli-start.md)

    return hashlib.sha256(review_json.encode()).hexdigest() if review_json else None


def review_changes(review: dict[str, Any] | None) -> list[ReviewChange]:
    """The parts a pending review changes: ``[{"field","title","previous","new","diff"}]``.

    ``diff`` is a unified diff (:func:`unified_diff`); parts that did not change are left out,
    so a review of a server that went back to the accepted text has none.
    """
    if not review:
        return []
    prev = review.get("previous") or {}
    out: list[ReviewChange] = []
    for key, title in FIELDS:
        d = unified_diff(prev.get(key), review.get(key), title)
        if d:
            out.append({"field": key, "title": title, "previous": prev.get(key), "new": review.get(key), "diff": d})
    return out


def review_view(review: dict[str, Any] | None) -> dict[str, Any] | None:
    """What changed in a flagged tool, for a page: ``{"kind","parts":[(title, diff_lines)],"previous_user_class"}``."""
    if not review:
        return None
    prev = review.get("previous") or {}
    parts = []
    for key, title in FIELDS:
        d = diff_lines(prev.get(key), review.get(key))
        if d:
            parts.append((title, d))
    return {"kind": review.get("kind", "changed"), "parts": parts,
            "previous_user_class": review.get("previous_user_class")}
