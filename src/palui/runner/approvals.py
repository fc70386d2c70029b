"""Durable approvals (spec §5): one exact call, once, before it expires.

An approval binds a tool call id to the hash of its canonical arguments; an answer is
accepted only while the approval is ``pending`` and unexpired, and the approved call
runs only if its arguments hash to the same value and the approval was not used.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from palui.connectors.registry import canonical_json
from palui.errors import ApprovalError, NotFound, UsageError
from palui.runner import elicitations as questions
from palui.runner.pending import args_hash
from palui.runner.state import new_id
from palui.store import expiry_bound, standing
from palui.store.approval_rows import as_dict as as_dict  # the listed shape (re-exported)
from palui.store.db import Database
from palui.text.display import named
from palui.types import ApprovalStatus

if TYPE_CHECKING:
    from palui.results import TurnApproval, UntrustedArg

#: The cancel reason of an approval whose turn was stopped (``/stop``, a removed job).
STOPPED = "the turn was stopped"
#: Why an approved call is refused when its approval was used already (spec §5.4: one exact call, once).
REPLAY = "approval already used (replay refused)"



def marking_inputs(db: Database, conversation_id: str) -> tuple[list[tuple[str, str]], list[str]]:
    """What an approval's marks are found from (spec §4.6): the conversation's untrusted content as
    ``(source, text)`` pairs, oldest first, and the person's own words (its chat and job turns' inputs)."""
    untrusted = [(r["source"], r["text"]) for r in
                 db.all("SELECT source, text FROM untrusted_content WHERE conversation_id = ? ORDER BY id",
                        (conversation_id,))]
    own = [r["input"] for r in db.all("SELECT input FROM turns WHERE conversation_id = ? AND origin IN"
                                      " ('chat', 'job')", (conversation_id,))]
    return untrusted, own


def marks_for(args: Any, untrusted: list[tuple[str, str]], own: list[str],
              schema: dict[str, Any] | None, tool: str | None = None) -> list[UntrustedArg]:
    """The marks of a call's ``args`` to ``tool`` (:func:`palui.policy.taint.untrusted_args`). Pure and CPU-bound
    (about 0.12 s per MB of untrusted text, 1.7 s per MB of argument): the runner calls it in a worker thread."""
    if not untrusted:
        return []
    # only when an approval is made (start cost: docs/decisions/0085-a-light-cli-start.md)
    from palui.policy.taint import untrusted_args

    return cast("list[UntrustedArg]", untrusted_args(args, untrusted, schema=schema, own_texts=own, tool=tool))


def create(db: Database, *, turn_id: str, conversation_id: str, call: Mapping[str, Any], tool_class: str,
           class_source: str, origin: str, reason: str, expiry_seconds: float, now: float | None = None,
           schema: dict[str, Any] | None = None, marks: list[UntrustedArg] | None = None) -> TurnApproval:
    """Store a pending approval for ``call`` (``{"id","tool","args"}``) and return it as a dict.

    Its argument values that appear in untrusted content of the conversation are marked (``marks``, else
    found here with :func:`marks_for`; spec §4.6), except values fixed by the tool's input ``schema`` (an
    ``enum`` or ``const``) and values the person wrote themselves (the inputs of the conversation's chat
    and job turns).
    """
    now = time.time() if now is None else now
    if marks is None:
        marks = marks_for(call["args"], *marking_inputs(db, conversation_id), schema, call["tool"])
    aid = new_id("a")
    with db.write() as c:
        c.execute(
            "INSERT INTO approvals (id, turn_id, tool_call_id, tool, class, class_source, origin, reason, args_json,"
            " args_hash, untrusted_args, status, created_at, expires_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (aid, turn_id, call["id"], call["tool"], tool_class, class_source, origin, reason,
             canonical_json(call["args"]), args_hash(call["args"]), json.dumps(marks, allow_nan=False), "pending", now,
             now + expiry_seconds),
        )
    return get(db, aid)


def get(db: Database, aid: str) -> TurnApproval:
    r = db.one("SELECT * FROM approvals WHERE id = ?", (aid,))
    if r is None:
        raise NotFound(f"unknown approval {named(aid)} (see: palui approvals list)")
    return as_dict(r)


def status(db: Database, aid: str) -> str | None:
    """An approval's status word, None when there is no such approval."""
    r = db.one("SELECT status, expires_at FROM approvals WHERE id = ?", (aid,))
    if r is None:
        return None
    return "expired" if r["status"] == "pending" and r["expires_at"] <= time.time() else r["status"]


def sweep(db: Database, now: float | None = None) -> int:
    """Mark pending approvals past their expiry ``expired`` (spec §5: expiry counts as denial), and sweep
    the questions of servers (:func:`palui.runner.elicitations.sweep`) and the standing approvals past theirs."""
    now = time.time() if now is None else now
    questions.sweep(db, now)  # a server's question to the person waits where approvals wait (spec §7)
    standing.expire(db, now)  # a standing approval past its expiry answers nothing (spec §5.9)
    with db.write() as c:
        expiry_bound.clamp_pending(c, "approvals")  # a row an unbounded expiry setting made expires as it is shown
        return c.execute(
            "UPDATE approvals SET status='expired', answered_at=? WHERE status='pending' AND expires_at <= ?",
            (now, now),
        ).rowcount


def answer(db: Database, aid: str, approve: bool, via: str, now: float | None = None,
           refusal: Callable[[sqlite3.Row], str | None] | None = None, reason: str | None = None,
           stop: bool = False) -> TurnApproval:
    """Record the person's answer, given on front end or channel ``via``. Only a pending, unexpired
    approval can be answered. ``reason`` (a denial's, the person's own words) is what the model is
    told; ``stop`` (a denial's) is "deny and stop": the tool use ends (spec §5.10). ``refusal(row)``
    re-decides an approve (spec §5): a reason it returns cancels the approval instead (in the same
    transaction).

    Raises:
        NotFound: no such approval.
        ApprovalError: it expired, was already answered (replay) or cancelled (``turn_id`` is set
            when the turn can go on with the refusal as the call's result).
    """
    now = time.time() if now is None else now
    if not isinstance(aid, str) or not aid.strip():
        raise UsageError("an approval answer needs an approval id (see: palui approvals list)")
    with db.write(durable=True) as c:  # an answer survives a power cut
        r = c.execute("SELECT * FROM approvals WHERE id = ?", (aid,)).fetchone()
        if r is None:
            raise NotFound(f"unknown approval {named(aid)} (see: palui approvals list)")
        expired = r["status"] == "pending" and r["expires_at"] <= now
        why = refusal(r) if (approve and refusal is not None and r["status"] == "pending" and not expired) else None
        if expired:
            # Committed before refusing: expiry is a denial the turn can go on with.
            c.execute(
                "UPDATE approvals SET status='expired', answered_at=?, answered_via=? WHERE id=?", (now, via, aid)
            )
        elif why:
            # Re-decided: committed before refusing, the turn goes on with the refusal as the result.
            c.execute(
                "UPDATE approvals SET status='cancelled', cancel_reason=?, answered_at=?, answered_via=? WHERE id=?",
                (why, now, via, aid),
            )
        elif r["status"] == "expired":
            c.execute("UPDATE approvals SET answered_via=COALESCE(answered_via, ?) WHERE id=?", (via, aid))
            expired = True  # the same refusal whether the sweep or this answer found it expired
        elif r["status"] == "cancelled":
            why_then = r["cancel_reason"] or STOPPED
            # Cancelled by a re-decision, the turn goes on with it; cancelled by /stop, the turn ended.
            raise ApprovalError(f"approval {aid} cancelled: {why_then}", None if why_then == STOPPED else r["turn_id"])
        elif r["status"] != "pending":
            raise ApprovalError(f"approval {aid} is already {r['status']}; an approval is answered once")
        else:
            status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
            c.execute(
                "UPDATE approvals SET status=?, answered_at=?, answered_via=?, deny_reason=?, stop=? WHERE id=?"
                " AND status='pending'",
                (status.value, now, via, None if approve else (reason or None), int(stop and not approve), aid),
            )
    if expired:
        raise ApprovalError(f"approval {aid} expired, which counts as a denial; the turn goes on", r["turn_id"])
    if why:
        raise ApprovalError(f"approval {aid} cancelled: {why}", r["turn_id"])
    return get(db, aid)


def consume(db: Database, aid: str, call: Mapping[str, Any], now: float | None = None) -> tuple[bool, str]:
    """At resume: may the held call run? Returns (allowed, reason); marks the approval used.

    Allowed only if approved, not used before, and the call's arguments hash to the
    approved hash. Anything else — denied, expired, cancelled, changed arguments, a
    replay, a missing approval — is a denial (fail closed).
    """
    now = time.time() if now is None else now
    with db.write() as c:
        r = c.execute("SELECT * FROM approvals WHERE id = ?", (aid,)).fetchone()
        if r is None:
            return False, "approval missing"
        if r["status"] == "pending":
            if r["expires_at"] <= now:
                c.execute("UPDATE approvals SET status='expired', answered_at=? WHERE id=?", (now, aid))
                return False, "approval expired"
            return False, "pending"
        if r["status"] == "cancelled" and r["cancel_reason"]:
            return False, f"cancelled: {r['cancel_reason']}"
        if r["status"] != "approved":
            return False, f"approval {r['status']}"
        if r["used"]:
            return False, REPLAY
        if r["args_hash"] != args_hash(call["args"]) or r["tool"] != call["tool"] or r["tool_call_id"] != call["id"]:
            return False, "arguments differ from the approved ones"
        cur = c.execute("UPDATE approvals SET used = 1 WHERE id = ? AND used = 0", (aid,))
        if cur.rowcount != 1:
            return False, REPLAY
    return True, "approved"


def stopped(db: Database, aid: str) -> bool:
    """Whether the person denied ``aid`` with "deny and stop" (spec §5.10)."""
    r = db.one("SELECT stop FROM approvals WHERE id = ?", (aid,))
    return bool(r is not None and r["stop"])


def deny_reason(db: Database, aid: str) -> str | None:
    """The person's reason for denying ``aid`` (``/deny ID REASON``), or None."""
    r = db.one("SELECT deny_reason FROM approvals WHERE id = ?", (aid,))
    return r["deny_reason"] if r is not None else None


def cancel_for_turn(db: Database, turn_id: str, now: float | None = None, reason: str = STOPPED) -> int:
    """Cancel a turn's pending approvals (``/stop``), and the questions servers asked it."""
    now = time.time() if now is None else now
    questions.cancel_for_turn(db, turn_id, now=now)
    with db.write() as c:
        return c.execute(
            "UPDATE approvals SET status='cancelled', cancel_reason=?, answered_at=? WHERE turn_id=? AND"
            " status='pending'",
            (reason, now, turn_id),
        ).rowcount
