"""Durable questions of MCP servers to the person (the ``elicitations`` table, spec §7).

An elicitation waits where approvals wait: stored with its turn, answered once through the
service's one door (:meth:`palui.service.ElicitationsPart.answer`), expired after the approval
expiry of its turn's origin (expiry is a decline), cancelled by ``/stop``. Its status is
``pending``, ``accepted``, ``declined``, ``cancelled`` or ``expired``.

Two eras (MCP 2026-07-28 "Multi round-trip requests" and the older server-to-client request):

- ``input_required``: the server answered the call with questions and a request state; the turn
  pauses (status ``awaiting_approval``) and the call is sent again with the answers, in whichever
  process resumes the turn, also after a restart.
- ``in_call``: the question arrived inside an open call; the process holding the call waits for
  the answer (``owner``). If that process ends first, the question is cancelled.

An accepted form's content is kept (``content_json``) only until the reply is sent, then cleared:
the audit keeps the action and the field names, never values. The answer to a secret question is not
stored at all: the process that accepted it holds it in memory (:mod:`palui.runner.secret_answers`,
``owner`` names that process) and sends it.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.connectors.base import Question, Reply
from palui.errors import ApprovalError, NotFound, UsageError
from palui.runner import secret_answers
from palui.runner.state import OWNER, new_id, owner_alive
from palui.store import expiry_bound
from palui.store.db import Database
from palui.text.display import named
from palui.text.elicitation import fields, url_host
from palui.text.secret_fields import secret_fields

if TYPE_CHECKING:
    from palui.results import TurnElicitation

PENDING = "pending"
#: The status an answered action leaves; expiry is a decline on the wire.
STATUS_OF = {"accept": "accepted", "decline": "declined", "cancel": "cancelled"}
ACTION_OF = {"accepted": "accept", "declined": "decline", "cancelled": "cancel", "expired": "decline"}
STOPPED = "the turn was stopped"


def _iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, UTC).isoformat() if t else None


def create(db: Database, *, turn_id: str, call_id: str, tool: str, connector: str, era: str, question: Question,
           origin: str, expiry_seconds: float, round_no: int = 1, auto: Reply | None = None,
           reason: str | None = None, now: float | None = None) -> TurnElicitation:
    """Store one question and return it (:func:`as_dict`). ``auto`` is Palui's own reply when it does
    not ask the person (a schema it cannot show, too many questions, URL mode in a job): the row is
    stored answered, with ``reason``, and ``answered_via`` ``palui``."""
    now = time.time() if now is None else now
    eid = new_id("e")
    status = STATUS_OF[auto.action] if auto is not None else PENDING
    with db.write() as c:
        c.execute(
            "INSERT INTO elicitations (id, turn_id, tool_call_id, tool, connector_id, era, round, request_key, mode,"
            " message, schema_json, url, server_ref, origin, status, reason, answered_via, owner, created_at,"
            " expires_at, answered_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (eid, turn_id, call_id, tool, connector, era, round_no, question.key, question.mode, question.message,
             json.dumps(question.schema, allow_nan=False) if question.schema is not None else None, question.url,
             question.elicitation_id, origin, status, reason, "palui" if auto is not None else None,
             OWNER if era == "in_call" else None, now, now + expiry_seconds, now if auto is not None else None),
        )
    return get(db, eid)


def as_dict(r: Any) -> TurnElicitation:
    """The ``ElicitationsPart.get`` shape: ``{"id","turn","tool","connector","era","round","key","mode",
    "message","schema","fields","url","url_host","elicitation_ref","origin","status","action","reason",
    "answered_via","sent","created_at","expires_at","answered_at"}`` (times ISO 8601 UTC; ``fields`` are
    the field names; ``action`` is what the server is (or will be) sent, None while pending)."""
    schema = json.loads(r["schema_json"]) if r["schema_json"] else None
    return {
        "id": r["id"], "turn": r["turn_id"], "tool_call_id": r["tool_call_id"], "tool": r["tool"],
        "connector": r["connector_id"], "era": r["era"], "round": r["round"], "key": r["request_key"],
        "mode": r["mode"], "message": r["message"], "schema": schema, "fields": [f.name for f in fields(schema)],
        "url": r["url"], "url_host": url_host(r["url"]), "elicitation_ref": r["server_ref"], "origin": r["origin"],
        "status": r["status"], "action": ACTION_OF.get(r["status"]), "reason": r["reason"],
        "answered_via": r["answered_via"], "sent": bool(r["sent"]), "created_at": _iso(r["created_at"]),
        "expires_at": expiry_bound.iso(r["created_at"], r["expires_at"]) if r["expires_at"] else None,
        "answered_at": _iso(r["answered_at"]),
    }


def get(db: Database, eid: str) -> TurnElicitation:
    """One elicitation. Raises NotFound."""
    r = db.one("SELECT * FROM elicitations WHERE id = ?", (eid,))
    if r is None:
        raise NotFound(f"unknown question {named(eid)} (see: palui elicitations list)")
    e = as_dict(r)
    if e["status"] == PENDING and r["expires_at"] <= time.time():
        # Expired (a decline) whether or not a sweep has marked it yet: reads never write.
        e = {**e, "status": "expired", "action": ACTION_OF["expired"]}
    return e


def for_ids(db: Database, ids: list[str]) -> list[TurnElicitation]:
    """The elicitations ``ids``, in that order (unknown ids left out)."""
    by_id = {r["id"]: as_dict(r) for r in db.all(
        f"SELECT * FROM elicitations WHERE id IN ({','.join('?' for _ in ids)})", tuple(ids))} if ids else {}
    return [by_id[i] for i in ids if i in by_id]


def pending_for_turn(db: Database, turn_id: str) -> list[TurnElicitation]:
    return [as_dict(r) for r in db.all("SELECT * FROM elicitations WHERE turn_id = ? AND status = 'pending'"
                                       " ORDER BY created_at", (turn_id,))]


def listing(db: Database, status: str | None = PENDING, limit: int = 100) -> list[TurnElicitation]:
    """Elicitations oldest first. ``status`` pending: those waiting now (pending and unexpired, through the
    (status, expires_at) index); another status or None (all): the newest ``limit`` of them."""
    if status == PENDING:
        rows = db.all("SELECT * FROM elicitations WHERE status = 'pending' AND expires_at > ? ORDER BY created_at",
                      (time.time(),))
    elif status:
        rows = db.all("SELECT * FROM (SELECT * FROM elicitations WHERE status = ? ORDER BY created_at DESC LIMIT ?)"
                      " ORDER BY created_at", (status, limit))
    else:
        rows = db.all("SELECT * FROM (SELECT * FROM elicitations ORDER BY created_at DESC LIMIT ?) ORDER BY created_at",
                      (limit,))
    return [as_dict(r) for r in rows]


def sweep(db: Database, now: float | None = None) -> int:
    """Expire pending questions past their expiry (a decline, spec §5/§7); cancel ``in_call`` questions
    whose process ended (the call went with it); clear answer content no live turn will send.
    Returns how many questions changed."""
    now = time.time() if now is None else now
    with db.write() as c:
        expiry_bound.clamp_pending(c, "elicitations")  # as shown: at most 30 days after it was asked
        n = c.execute("UPDATE elicitations SET status='expired', answered_at=? WHERE status='pending'"
                      " AND expires_at <= ?", (now, now)).rowcount
        for r in c.execute("SELECT id, owner FROM elicitations WHERE status='pending' AND era='in_call'").fetchall():
            if not owner_alive(r["owner"]):
                n += c.execute("UPDATE elicitations SET status='cancelled', answered_at=?, reason=? WHERE id=?"
                               " AND status='pending'", (now, "the process holding the call ended", r["id"])).rowcount
        clear_unsent(c)
        # Secret answers this process holds (in memory, few) for turns that ended before sending them.
        ended = []
        for eid in secret_answers.held_ids():
            r = c.execute("SELECT (SELECT t.status FROM turns t WHERE t.id = e.turn_id) FROM elicitations e"
                          " WHERE e.id = ?", (eid,)).fetchone()
            if r is None or r[0] in ENDED:
                ended.append(eid)
    secret_answers.drop(ended)
    return n


#: Statuses of a turn that will never send a question's answer.
ENDED = ("done", "stopped", "error", "budget", "partial", "failed")


def clear_unsent(c: Any, turn_id: str | None = None) -> None:
    """Drop the answer content of questions whose turn ended before sending it (``turn_id``: of that turn
    only), on the caller's write transaction ``c``. Driven from the few rows that hold content (a partial
    index, migration 35), never from the list of finished turns."""
    ended = ",".join(f"'{s}'" for s in ENDED)
    if turn_id is None:
        c.execute("UPDATE elicitations SET content_json=NULL WHERE content_json IS NOT NULL AND"
                  f" (SELECT t.status FROM turns t WHERE t.id = elicitations.turn_id) IN ({ended})")
    else:
        c.execute("UPDATE elicitations SET content_json=NULL WHERE turn_id = ? AND content_json IS NOT NULL",
                  (turn_id,))


def next_expiry(db: Database) -> tuple[float | None, bool, bool]:
    """``(earliest expiry of a pending question or None, a pending in_call question exists, an answer
    waits to be sent)``: what the service's tick needs to know when to sweep again (index searches)."""
    r = db.one("SELECT (SELECT MIN(expires_at) FROM elicitations WHERE status = 'pending'),"
               " EXISTS (SELECT 1 FROM elicitations WHERE status = 'pending' AND era = 'in_call'),"
               " EXISTS (SELECT 1 FROM elicitations WHERE content_json IS NOT NULL)")
    assert r is not None
    return r[0], bool(r[1]), bool(r[2])


def holder(db: Database, eid: str) -> str | None:
    """The process (``host:pid``) holding the open call of an ``in_call`` question, or the accepted answer
    of a secret one; None when no process does."""
    r = db.one("SELECT owner FROM elicitations WHERE id = ?", (eid,))
    return r["owner"] if r is not None else None


def answer(db: Database, eid: str, action: str, content: dict[str, Any] | None, via: str,
           now: float | None = None, secret: bool = False) -> TurnElicitation:
    """Record the person's answer once (validated by the caller). Returns the elicitation. ``secret``: the
    content is held in this process's memory (:mod:`palui.runner.secret_answers`), never stored.

    Raises NotFound; ApprovalError when it expired (a decline; ``turn_id`` set: the turn goes on),
    was cancelled or was already answered (the same refusals as an approval, spec §5).
    """
    now = time.time() if now is None else now
    if action not in STATUS_OF:
        raise UsageError(f"an answer is accept, decline or cancel (got {action!r})")
    with db.write(durable=True) as c:  # an answer survives a power cut
        r = c.execute("SELECT * FROM elicitations WHERE id = ?", (eid,)).fetchone()
        if r is None:
            raise NotFound(f"unknown question {named(eid)} (see: palui elicitations list)")
        expired = r["status"] == PENDING and r["expires_at"] <= now
        if expired:
            c.execute("UPDATE elicitations SET status='expired', answered_at=?, answered_via=? WHERE id=?",
                      (now, via, eid))
        elif r["status"] == PENDING:
            keep = action == "accept" and content is not None and not secret
            c.execute("UPDATE elicitations SET status=?, content_json=?, answered_at=?, answered_via=?,"
                      " owner=? WHERE id=? AND status='pending'",
                      (STATUS_OF[action], json.dumps(content, allow_nan=False) if keep else None, now, via,
                       OWNER if secret and action == "accept" else r["owner"], eid))
            if secret and action == "accept":
                secret_answers.hold(eid, content or {})
    if expired or (r["status"] == "expired"):
        raise ApprovalError(f"question {eid} expired, which counts as a decline; the turn goes on", r["turn_id"])
    if r["status"] == "cancelled" and r["reason"]:
        raise ApprovalError(f"question {eid} was cancelled: {r['reason']}")
    if r["status"] != PENDING:
        raise ApprovalError(f"question {eid} is already {r['status']}; a question is answered once")
    return get(db, eid)


def reply_of(db: Database, eid: str, now: float | None = None) -> Reply | None:
    """The reply to send for an answered (or expired) question; None while it is pending and unexpired.
    An expired one is marked so and answered ``decline``."""
    now = time.time() if now is None else now
    r = db.one("SELECT status, content_json, expires_at, mode, schema_json, owner FROM elicitations WHERE id = ?",
               (eid,))
    if r is None:
        return Reply("decline")
    if r["status"] == PENDING:
        if r["expires_at"] > now:
            return None
        with db.write() as c:
            c.execute("UPDATE elicitations SET status='expired', answered_at=? WHERE id=? AND status='pending'",
                      (now, eid))
        return Reply("decline")
    action = ACTION_OF.get(r["status"], "decline")
    if action == "accept" and r["mode"] == "form":
        if r["content_json"] is None and r["schema_json"] and secret_fields(json.loads(r["schema_json"])):
            content = secret_answers.held(eid)
            if content is not None:
                return Reply("accept", content)
            if r["owner"] != OWNER and owner_alive(r["owner"]):
                return None  # another live process holds the answer and sends it
            return Reply("cancel")  # the process that held the secret answer ended: the server is told cancel
        return Reply("accept", json.loads(r["content_json"]) if r["content_json"] else {})
    return Reply(action)  # type: ignore[arg-type]  # ACTION_OF holds only the three actions


def mark_sent(db: Database, ids: list[str]) -> None:
    """The replies of ``ids`` went to the server: drop the answer content (values are never kept)."""
    if ids:
        with db.write() as c:
            c.execute(f"UPDATE elicitations SET sent=1, content_json=NULL WHERE id IN ({','.join('?' for _ in ids)})",
                      tuple(ids))
        secret_answers.drop(ids)


def cancel_for_turn(db: Database, turn_id: str, reason: str = STOPPED, now: float | None = None) -> int:
    """Cancel a turn's pending questions (``/stop``, a removed job)."""
    now = time.time() if now is None else now
    with db.write() as c:
        n = c.execute("UPDATE elicitations SET status='cancelled', reason=?, answered_at=? WHERE turn_id=?"
                      " AND status='pending'", (reason, now, turn_id)).rowcount
        clear_unsent(c, turn_id)  # a stopped turn sends no answer: none is kept
        return n


def cancel_for_call(db: Database, turn_id: str, call_id: str, reason: str, now: float | None = None) -> int:
    """Cancel the pending questions of one call (its process ended while they waited) and drop answers."""
    now = time.time() if now is None else now
    with db.write() as c:
        n = c.execute("UPDATE elicitations SET status='cancelled', reason=?, answered_at=? WHERE turn_id=?"
                      " AND tool_call_id=? AND status='pending'", (reason, now, turn_id, call_id)).rowcount
        c.execute("UPDATE elicitations SET content_json=NULL WHERE turn_id=? AND tool_call_id=?", (turn_id, call_id))
    return n


def cancel(db: Database, eid: str, reason: str, now: float | None = None) -> None:
    """Cancel one question still pending (a gateway call waited for the person long enough)."""
    now = time.time() if now is None else now
    with db.write() as c:
        c.execute("UPDATE elicitations SET status='cancelled', reason=?, answered_at=? WHERE id=? AND status='pending'",
                  (reason, now, eid))


def question_of(e: TurnElicitation) -> Question:
    """The question a stored elicitation ``e`` holds, as the server asked it."""
    return Question(key=str(e["key"]), mode="url" if e["mode"] == "url" else "form", message=e["message"],
                    schema=e["schema"], url=e["url"], elicitation_id=e["elicitation_ref"])
