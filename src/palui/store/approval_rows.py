"""An approval row as every surface shows it (the ``palui approvals list --json`` shape, spec §5).

In the store, not the runner, so that listing approvals imports no runner code
(docs/decisions/0085-a-light-cli-start.md); :mod:`palui.runner.approvals` writes them.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC
from typing import TYPE_CHECKING

from palui.store import expiry_bound
from palui.text.strict_json import finite

if TYPE_CHECKING:
    from palui.results import TurnApproval


def as_dict(r: sqlite3.Row) -> TurnApproval:
    """The ``palui approvals list --json`` shape. Arguments an earlier Palui stored with ``NaN`` or ``Infinity``
    (its row is hashed: never rewritten) are shown with those numbers as strings (spec §10.1)."""
    return {
        "id": r["id"], "turn": r["turn_id"], "origin": r["origin"], "tool": r["tool"],
        "args": finite(json.loads(r["args_json"])), "class": r["class"], "class_source": r["class_source"],
        "reason": r["reason"], "status": r["status"], "created_at": _iso(r["created_at"]),
        "expires_at": expiry_bound.iso(r["created_at"], r["expires_at"]),
        "untrusted_args": finite(json.loads(r["untrusted_args"])),
        "tool_call_id": r["tool_call_id"], "args_hash": r["args_hash"], "used": bool(r["used"]),
        "answered_via": r["answered_via"], "cancel_reason": r["cancel_reason"],
        "answered_at": _iso(r["answered_at"]) if r["answered_at"] else None,
        "deny_reason": r["deny_reason"] if "deny_reason" in r.keys() else None,
        "rule": r["rule_id"], "rule_made": r["rule_made"], "stop": bool(r["stop"]),
    }


def _iso(t: float) -> str:
    from datetime import datetime

    return datetime.fromtimestamp(t, UTC).isoformat()
