"""Standing approvals as stored (spec §5.9): made, found for an ask, used, suspended, expired and removed.

A standing approval (``r-…``, the ``standing_approvals`` table) is the person's answer given in advance. The pure
rules are :mod:`palui.policy.standing`; this module is what needs the database and the clock:

- :func:`make` stores one, made from an approval the person answered (the service's one door calls it, spec
  §5.6), bound to the tool's name, effective class and definition hash as they are now;
- :func:`find` is the approval gate's question: which active standing approval answers this ask, if any. It checks
  the binding first: a tool whose class or definition changed, that was flagged for review or that its connector
  no longer lists suspends the standing approval (the person told) and answers nothing;
- :func:`suspend_changed` does the same for every active one after any change to tools or connectors;
- :func:`expire` marks those past their expiry; :func:`remove` is the person's.

Every change to a row is an audit row of the chain (verdict ``rule``; spec §10.3), written in the same
transaction as the change.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.errors import NotFound, UsageError
from palui.policy import standing as rules
from palui.store import audit, catalog
from palui.store.ids import new_id
from palui.text.display import named

if TYPE_CHECKING:
    from palui.results import StandingApproval
    from palui.store.db import Database
    from palui.store.tools import ToolRow
    from palui.types import Notify

#: The audit verdict of a change to a standing approval (a call's verdict is run / ask / unavailable / off).
VERDICT = "rule"
#: ``answered_via`` of an ask a standing approval answered.
VIA = "rule"
DAY = 86400.0


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t is not None else None


def as_dict(r: Any) -> StandingApproval:
    """A stored row in the ``palui rules list --json`` shape."""
    constraints = json.loads(r["constraints"])
    return {"id": r["id"], "tool": r["tool"], "connector": r["connector"], "tool_class": r["tool_class"],
            "definition_hash": r["definition_hash"], "context": r["context"], "constraints": constraints,
            "described": rules.describe(constraints), "widened": rules.widened(constraints),
            "confirmed": bool(r["confirmed"]), "status": r["status"], "status_reason": r["status_reason"],
            "made_from": r["made_from"], "made_via": r["made_via"], "created_at": _iso(r["created_at"]) or "",
            "expires_at": _iso(r["expires_at"]) or "", "changed_at": _iso(r["changed_at"]) or "",
            "uses": int(r["uses"]), "last_used_at": _iso(r["last_used_at"])}


def get(db: Database, rule_id: str) -> StandingApproval:
    """One standing approval. Raises NotFound."""
    r = db.one("SELECT * FROM standing_approvals WHERE id = ?", (rule_id,))
    if r is None:
        raise NotFound(f"unknown standing approval {named(rule_id)} (see: palui rules list)")
    return as_dict(r)


def listed(db: Database, status: str | None = None) -> list[StandingApproval]:
    """Standing approvals, newest first: every one but the removed (``status`` None), or those of one status."""
    if status is None:
        rows = db.all("SELECT * FROM standing_approvals WHERE status != 'removed' ORDER BY created_at DESC, id")
    else:
        rows = db.all("SELECT * FROM standing_approvals WHERE status = ? ORDER BY created_at DESC, id", (status,))
    return [as_dict(r) for r in rows]


def _audit(c_db: Database, r: Any, outcome: str, reason: str, turn_id: str | None = None) -> None:
    """The audit row of one change (in the caller's transaction): the rule's tool and class, the context's origin,
    the hash of its constraints in place of a call's arguments."""
    context = str(r["context"])
    origin = "gateway" if context.startswith(rules.GATEWAY) else "job" if context == rules.JOB else "chat"
    audit.record(c_db, turn_id=turn_id, tool=str(r["tool"]), tool_class=str(r["tool_class"]), class_source=None,
                 origin=origin, tainted=context != rules.CHAT and context != rules.JOB, verdict=VERDICT,
                 reason=f"standing approval {r['id']} ({context}: {rules.describe(json.loads(r['constraints']))}): "
                        f"{reason}",
                 args_hash=hashlib.sha256(str(r["constraints"]).encode()).hexdigest(), outcome=outcome)


def make(db: Database, *, approval: Mapping[str, Any], row: ToolRow, context: str | None, widen: Mapping[str, str],
         confirmed: bool, via: str, expiry_days: float, now: float | None = None) -> StandingApproval:
    """Store a standing approval made from ``approval`` (a stored approval row, its call as the person saw it) for
    the tool ``row`` as stored now, in ``context``, with ``widen`` (argument → widening text). Audited ``rule made``.

    Raises:
        UsageError: it may not be made (:func:`palui.policy.standing.refusal_to_make`), or a widening is refused
            (:func:`palui.policy.standing.constraints_for`).
    """
    now = time.time() if now is None else now
    why = rules.refusal_to_make(row.tool_class.value, context, confirmed)
    if why:
        raise UsageError(f"no standing approval: {why}")
    assert context is not None
    marks = json.loads(approval["untrusted_args"] or "[]")
    try:
        constraints = rules.constraints_for(json.loads(approval["args_json"]), widen, marks)
    except ValueError as e:
        raise UsageError(f"no standing approval: {e}") from None
    rid = new_id("r")
    values = {"id": rid, "tool": row.name, "connector": row.connector, "tool_class": row.tool_class.value,
              "definition_hash": row.definition_hash, "context": context,
              "constraints": json.dumps(constraints, allow_nan=False, sort_keys=True), "confirmed": int(confirmed),
              "status": "active", "made_from": approval["id"], "made_via": via, "created_at": now,
              "expires_at": now + expiry_days * DAY, "changed_at": now}
    with db.write() as c:
        c.execute(f"INSERT INTO standing_approvals ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                  tuple(values.values()))
        c.execute("UPDATE approvals SET rule_made = ? WHERE id = ?", (rid, approval["id"]))
        until = _iso(values["expires_at"])
        _audit(db, values, "rule made", f"made by the person ({via}) from {approval['id']}, until {until}",
               approval["turn_id"])
    return get(db, rid)


def remove(db: Database, rule_id: str, via: str, now: float | None = None) -> StandingApproval:
    """The person removes a standing approval (any status but removed). Audited ``rule removed``. Raises NotFound,
    UsageError (already removed)."""
    now = time.time() if now is None else now
    with db.write() as c:
        r = c.execute("SELECT * FROM standing_approvals WHERE id = ?", (rule_id,)).fetchone()
        if r is None:
            raise NotFound(f"unknown standing approval {named(rule_id)} (see: palui rules list)")
        if r["status"] == "removed":
            raise UsageError(f"standing approval {rule_id} was removed already")
        c.execute("UPDATE standing_approvals SET status = 'removed', status_reason = ?, changed_at = ? WHERE id = ?",
                  (f"removed by the person ({via})", now, rule_id))
        _audit(db, r, "rule removed", f"removed by the person ({via})")
    return get(db, rule_id)


def _bound(r: Any, row: ToolRow | None) -> str | None:
    """Why the tool no longer is what the standing approval was made for, or None (spec §5.9: decided again)."""
    if row is None or not row.present:
        return "its tool is no longer listed (its connector was removed, or its server stopped listing it)"
    if row.changed and (row.review or {}).get("kind") not in ("loosened",):
        return "its tool's definition or class changed and waits for review"
    if row.tool_class.value != r["tool_class"]:
        return f"its tool's class changed from {r['tool_class']} to {row.tool_class.value}"
    if row.definition_hash != r["definition_hash"]:
        return "its tool's definition changed"
    return None


def _suspend(db: Database, r: Any, why: str, notify: Notify, now: float) -> bool:
    with db.write() as c:
        done = c.execute("UPDATE standing_approvals SET status = 'suspended', status_reason = ?, changed_at = ?"
                         " WHERE id = ? AND status = 'active'", (why, now, r["id"])).rowcount == 1
        if done:
            _audit(db, r, "rule suspended", why)
    if done:
        notify("notice", f"Standing approval {r['id']} ({r['tool']}, {r['context']}) is suspended: {why}. It answers "
                         f"nothing now; remove it with palui rules remove {r['id']}, and make a new one from the next "
                         "approval if you still want one.")
    return done


def suspend_changed(db: Database, notify: Notify, now: float | None = None) -> list[str]:
    """Suspend every active standing approval whose tool changed (class, definition, review, removal), telling the
    person of each. Called after every change to tools or connectors. Returns their ids."""
    now = time.time() if now is None else now
    out = []
    for r in db.all("SELECT * FROM standing_approvals WHERE status = 'active'"):
        why = _bound(r, catalog.tool_now(db, r["tool"]))
        if why and _suspend(db, r, why, notify, now):
            out.append(str(r["id"]))
    return out


def expire(db: Database, now: float | None = None) -> int:
    """Mark the active standing approvals past their expiry ``expired`` (audited). Returns how many."""
    now = time.time() if now is None else now
    rows = db.all("SELECT * FROM standing_approvals WHERE status = 'active' AND expires_at <= ?", (now,))
    for r in rows:
        with db.write() as c:
            if c.execute("UPDATE standing_approvals SET status = 'expired', status_reason = 'its expiry passed',"
                         " changed_at = ? WHERE id = ? AND status = 'active'", (now, r["id"])).rowcount == 1:
                _audit(db, r, "rule expired", "its expiry passed")
    return len(rows)


def find(db: Database, *, row: ToolRow, context: str | None, args: Any, marks: list[Any], rule_of_two: str | None,
         notify: Notify, now: float | None = None) -> str | None:
    """The id of the active standing approval that answers this ask, or None (spec §5.9): the tool's and the
    context's, unexpired, still bound to the tool as it is now (else suspended here, the person told), and whose
    constraints answer the call's arguments and marks (:func:`palui.policy.standing.answers`)."""
    if context is None:
        return None
    now = time.time() if now is None else now
    for r in db.all("SELECT * FROM standing_approvals WHERE tool = ? AND status = 'active' AND context = ?"
                    " ORDER BY created_at", (row.name, context)):
        if r["expires_at"] <= now:
            continue
        why = _bound(r, row)
        if why:
            _suspend(db, r, why, notify, now)
            continue
        if rules.refusal_to_make(row.tool_class.value, context, bool(r["confirmed"])):
            continue  # never answered where it could not be made
        if rules.answers(json.loads(r["constraints"]), args, marks, rule_of_two) is None:
            return str(r["id"])
    return None


def used(db: Database, rule_id: str, now: float | None = None) -> None:
    """Count one ask the standing approval answered (in the caller's transaction when there is one)."""
    now = time.time() if now is None else now
    with db.write() as c:
        c.execute("UPDATE standing_approvals SET uses = uses + 1, last_used_at = ? WHERE id = ?", (now, rule_id))


def resolve(db: Database, given: str) -> str:
    """The stored id ``given`` names (a unique prefix of at least six hex digits is enough). Raises UsageError
    for an ambiguous prefix."""
    from palui.store import ids

    return ids.resolve(db, given)


def expiry_days(value: float | None, default: float) -> float:
    """A standing approval's days to live: ``value`` when given (1 to 366), else ``default``. Raises UsageError."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not 1 <= value <= 366:
        raise UsageError("a standing approval lives 1 to 366 days")
    return float(value)
