"""The approval request as the person's channel shows it (SPEC §4, §5)."""

from __future__ import annotations

import json
from typing import Any


def approval_prompt(a: dict[str, Any]) -> str:
    """The approval ``a`` (the ``palui approvals list --json`` shape) as told on the person's channel:
    tool, class, reason, the exact arguments, the untrusted-value marks and how to answer."""
    lines = [f"Approval {a['id']}: {a['tool']} ({a['class']}) wants to run — {a['reason']}",
             f"  arguments: {json.dumps(a['args'], ensure_ascii=False)}"]
    for m in a["untrusted_args"]:
        lines.append(f"  ! {m['path']} = {m['value']!r} came from untrusted content: {m['source']}")
    lines.append(f"  answer with /approve {a['id']} or /deny {a['id']} (expires {a['expires_at']})")
    return "\n".join(lines)
