"""The approval request as the person's channel shows it (spec §4, §5): the inbox, notifications,
the terminal and every chat channel. Hidden characters are escaped and marked (issue 10 §2)."""

from __future__ import annotations

from collections.abc import Mapping
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
    """One untrusted-value mark of an approval (spec §4): path, value and its source, escaped."""
    return (f"! {shown(m['path'], one_line=True)} = '{shown(m['value'], one_line=True)}' came from untrusted"
            f" content: {shown(m['source'], one_line=True)}")
