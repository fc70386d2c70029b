"""An approval is decided again when it is answered and just before its call is sent (spec §5).

A pending or approved call runs only if the tool, as stored *now*, would still be offered
to this turn: it exists and is listed, its connector is enabled, it is switched on, its
description and schema are not flagged "changed — review", and the matrix gives ``run`` or
``ask`` for its effective class, the turn's origin and taint. Anything else cancels the approval
with a reason the model and the person are told. A class tightened from write to destructive
(still ``ask``) keeps it, and so does a looser class that waits for review (spec §7.6): the tool
keeps its stricter class and the definition the person approved is unchanged.
"""

from __future__ import annotations

import time
from typing import Any

from palui.policy.matrix import decide
from palui.store import catalog
from palui.store.db import Database
from palui.types import NEEDS_TASKS, Notify, Origin, Verdict


def refusal(db: Database, tool: str, origin: str, tainted: bool, taint_source: str | None) -> str | None:
    """Why the call to ``tool`` may no longer run in a turn of ``origin``/``tainted``, or None when it may.

    The reason completes "the call was refused: …", e.g. "the tool was switched off after this
    approval was asked".
    """
    # the catalog version and the row in one read (docs/decisions/0076-a-per-process-tool-catalog.md)
    row = catalog.tool_now(db, tool)
    if row is None or not row.present:
        return "the tool was removed by its server after this approval was asked"
    if not row.connector_enabled:
        return f"the connector {row.connector} was disabled after this approval was asked"
    if row.changed and (row.review or {}).get("kind") not in ("loosened", "tightened"):
        return "the tool's definition changed after this approval was asked (flagged \"changed — review\")"
    if not row.enabled:
        return "the tool was switched off after this approval was asked"
    if row.needs_tasks:
        return f"the tool {NEEDS_TASKS}"
    d = decide(row.tool_class, row.enabled, Origin(origin), tainted, taint_source)
    if d.verdict in (Verdict.RUN, Verdict.ASK):
        return None
    return f"the tool is now {d.verdict.value} for this turn ({d.reason})"


def approval_refusal(db: Database, approval: Any) -> str | None:
    """:func:`refusal` for a stored approval row (its tool, and its turn's origin and current taint)."""
    t = db.one("SELECT origin, tainted, taint_source FROM turns WHERE id = ?", (approval["turn_id"],))
    if t is None:
        return "the turn of this approval no longer exists"
    return refusal(db, approval["tool"], t["origin"], bool(t["tainted"]), t["taint_source"])


def cancel(db: Database, approval_id: str, reason: str, *, from_status: tuple[str, ...] = ("pending",),
           now: float | None = None) -> bool:
    """Mark an approval ``cancelled`` with ``reason`` if it is still in ``from_status``. True if it changed."""
    now = time.time() if now is None else now
    marks = ",".join("?" for _ in from_status)
    with db.write() as c:
        return c.execute(f"UPDATE approvals SET status='cancelled', cancel_reason=?, answered_at=? WHERE id=? AND"
                         f" status IN ({marks})", (reason, now, approval_id, *from_status)).rowcount == 1


def cancel_refused(db: Database, notify: Notify, now: float | None = None) -> list[str]:
    """Re-decide every pending approval; cancel (with its reason) and tell the person of each one
    whose call may no longer run, so ``approvals list`` stays true (spec §5). Returns their ids."""
    out = []
    for a in db.all("SELECT * FROM approvals WHERE status = 'pending'"):
        why = approval_refusal(db, a)
        if why and cancel(db, a["id"], why, now=now):
            out.append(a["id"])
            notify("notice", f"Approval {a['id']} ({a['tool']}) was cancelled: {why}.", turn_id=a["turn_id"],
                   approval_id=a["id"])
    return out
