"""The audit log: every tool call with its decision and outcome (SPEC §10)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from palui.store.db import Database


def record(db: Database, *, turn_id: str | None, tool: str, tool_class: str | None, class_source: str | None,
           origin: str, tainted: bool, verdict: str, reason: str, args_hash: str | None, outcome: str,
           duration_ms: float | None = None) -> None:
    """Append one audit row. ``outcome``: ok, error, refused, asked, denied, cancelled; may have run…"""
    with db.write() as c:
        c.execute(
            "INSERT INTO audit (time, turn_id, tool, class, class_source, origin, tainted, verdict, reason, args_hash,"
            " outcome, duration_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (time.time(), turn_id, tool, tool_class, class_source, origin, int(tainted), verdict, reason, args_hash,
             outcome, duration_ms),
        )


def rows(db: Database, turn_id: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Audit rows oldest first: ``[{"time","turn","tool","class","class_source","origin","tainted","verdict",
    "reason","args_hash","outcome","duration_ms"}]``."""
    sql = "SELECT * FROM audit"
    params: tuple = ()
    if turn_id:
        sql += " WHERE turn_id = ?"
        params = (turn_id,)
    sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT {int(limit)}) ORDER BY id"
    return [{
        "time": datetime.fromtimestamp(r["time"], UTC).isoformat(), "turn": r["turn_id"], "tool": r["tool"],
        "class": r["class"], "class_source": r["class_source"], "origin": r["origin"], "tainted": bool(r["tainted"]),
        "verdict": r["verdict"], "reason": r["reason"], "args_hash": r["args_hash"], "outcome": r["outcome"],
        "duration_ms": r["duration_ms"],
    } for r in db.all(sql, params)]
