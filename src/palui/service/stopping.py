"""Stopping turns in the database (spec §5): the work behind :meth:`palui.service.turns.TurnsPart.stop`."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from palui.runner import approvals, audit
from palui.runner import state as st
from palui.runner.pending import args_hash
from palui.store.db import Database
from palui.types import CallState


def stop_rows(db: Database, rows: list[Any], tool_or_none: Callable[[str], Any]) -> list[str]:
    """Stop each turn row: a running one (in a live process) is asked to stop at its next boundary; a
    paused or queued one, or one whose process died, is stopped now, its pending approvals and questions
    cancelled and its calls in flight audited ``cancelled; may have run``. Returns the turn ids acted on."""
    acted = []
    now = time.time()
    for r in rows:
        orphan = r["status"] == "running" and not st.owner_alive(r["owner"])
        in_flight: list[dict[str, Any]] = []
        with db.write() as c:
            if r["status"] in ("awaiting_approval", "queued") or orphan:
                # Nobody runs it (paused, queued, or its process died): stop it here.
                cur = c.execute(
                    "UPDATE turns SET status='stopped', error='stopped by the person', pending_json=NULL,"
                    " updated_at=? WHERE id=? AND status=? AND version=?",
                    (now, r["id"], r["status"], r["version"]),
                )
                if cur.rowcount:
                    c.execute(
                        "UPDATE approvals SET status='cancelled', cancel_reason=?, answered_at=?"
                        " WHERE turn_id=? AND status='pending'",
                        (approvals.STOPPED, now, r["id"]),
                    )
                    c.execute("UPDATE elicitations SET status='cancelled', reason=?, answered_at=?"
                              " WHERE turn_id=? AND status='pending'", (approvals.STOPPED, now, r["id"]))
                    acted.append(r["id"])
                    in_flight = [x for x in json.loads(r["pending_json"] or "[]") if x.get("state") == CallState.SENT]
            else:
                cur = c.execute("UPDATE turns SET stop_requested=1 WHERE id=? AND status='running'", (r["id"],))
                if cur.rowcount:
                    acted.append(r["id"])
        for call in in_flight:
            tool = tool_or_none(call["tool"])
            audit.record(
                db,
                turn_id=r["id"],
                tool=call["tool"],
                tool_class=tool.tool_class.value if tool else None,
                class_source=tool.class_source.value if tool else None,
                origin=r["origin"],
                tainted=bool(r["tainted"]),
                verdict="run",
                reason="stopped after the process running the call ended",
                args_hash=args_hash(call["args"]),
                outcome="cancelled; may have run",
            )
    return acted
