"""The approval request as the person's channel shows it (spec §4, §5): the inbox, notifications,
the terminal and every chat channel. Hidden characters are escaped and marked (spec §4.7)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from palui.text.display import shown, shown_json


def approval_prompt(a: Mapping[str, Any], expires: str | None = None) -> str:
    """The approval ``a`` (the ``palui approvals list --json`` shape) as told on the person's channel:
    tool, class, reason, the exact arguments, the untrusted-value marks and how to answer.
    ``expires`` replaces the stored expiry time with how it reads where it is shown
    ("expires 08:30, in 29 min", :func:`palui.text.when.expiry`)."""
    lines = [f"Approval {a['id']}: {a['tool']} ({a['class']}) wants to run — {shown(a['reason'], one_line=True)}",
             f"  arguments: {shown_json(a['args'])}"]
    for m in a["untrusted_args"]:
        lines.append("  " + mark_line(m))
    lines.append(f"  answer with /approve {a['id']} or /deny {a['id']} ({expires or 'expires ' + a['expires_at']})")
    return "\n".join(lines)


def mark_line(m: Mapping[str, Any]) -> str:
    """One untrusted-value mark of an approval (spec §4), escaped: the whole value when it was found
    whole (``! to = 'bob@evil.example' came from untrusted content: SOURCE``), else only the parts
    found, quoted (``! body: 'Luxury Palace' and '1 Rue de la Paix' came from untrusted content: SOURCE``).

    ``m`` is a mark of :func:`palui.policy.taint.untrusted_args`; a mark stored without ``spans`` (before
    parts were marked) reads as a whole value."""
    path, source = shown(m["path"], one_line=True), shown(m["source"], one_line=True)
    spans = m.get("spans") or [m["value"]]
    if spans == [m["value"]]:
        return f"! {path} = '{shown(m['value'], one_line=True)}' came from untrusted content: {source}"
    quoted = [f"'{shown(s, one_line=True)}'" for s in spans]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
    return f"! {path}: {listed} came from untrusted content: {source}"


def marked_arguments(marks: Sequence[Mapping[str, Any]]) -> set[str]:
    """The top-level argument names that carry a mark of spec §4.6 (``recipients[0]`` → ``recipients``, ``a.b`` →
    ``a``): a standing approval keeps them pinned (spec §5.9)."""
    return {re.split(r"[.\[]", str(m.get("path", "")), maxsplit=1)[0] for m in marks}
