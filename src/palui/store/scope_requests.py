"""Scope step-ups waiting for the person (spec §7.11): the ``scope_requests`` table.

A tool its server refused for a wider OAuth scope leaves one ``pending`` request per (connector, tool,
scopes): asked again while it waits, the same request is found (the person is told once). A sign-in whose
token holds every scope a request needs makes it ``granted``; the person's ``/deny`` makes it ``declined`` and
switches the tool off, in the same transaction. Ids are ``s-`` ids (:mod:`palui.store.ids`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from palui.errors import ApprovalError, NotFound
from palui.store import ids
from palui.text.display import named

if TYPE_CHECKING:
    from palui.results import ScopeRequest
    from palui.store.db import Database


def _shape(r) -> ScopeRequest:
    return {"id": r["id"], "connector": r["connector_id"], "tool": r["name"], "needed": r["needed"].split(),
            "granted": r["granted"].split(), "turn": r["turn_id"] or "", "status": r["status"], "reason": r["reason"],
            "created_at": r["created_at"], "answered_via": r["answered_via"]}


def ask(db: Database, *, connector: str, tool: str, name: str, needed: tuple[str, ...], granted: tuple[str, ...],
        turn_id: str | None, now: float | None = None) -> tuple[ScopeRequest, bool]:
    """The pending request of ``connector``'s tool ``tool`` (raw name; ``name`` model-visible) for the scopes
    ``needed`` beyond ``granted``: the one already waiting, or a new one. Returns ``(request, created)``."""
    wanted = " ".join(needed)
    with db.write() as c:
        r = c.execute("SELECT * FROM scope_requests WHERE connector_id = ? AND tool = ? AND needed = ?"
                      " AND status = 'pending'", (connector, tool, wanted)).fetchone()
        if r is not None:
            return _shape(r), False
        rid = ids.new_id("s")
        c.execute("INSERT INTO scope_requests (id, connector_id, tool, name, needed, granted, turn_id, created_at)"
                  " VALUES (?,?,?,?,?,?,?,?)", (rid, connector, tool, name, wanted, " ".join(granted), turn_id,
                                                time.time() if now is None else now))
        r = c.execute("SELECT * FROM scope_requests WHERE id = ?", (rid,)).fetchone()
    return _shape(r), True


def get(db: Database, request_id: str) -> ScopeRequest:
    """One request. Raises NotFound."""
    r = db.one("SELECT * FROM scope_requests WHERE id = ?", (request_id,))
    if r is None:
        raise NotFound(f"unknown scope request {named(request_id)}")
    return _shape(r)


def of_connector(db: Database, connector: str, status: str | None = "pending") -> list[ScopeRequest]:
    """``connector``'s requests (of one ``status``, or all), oldest first."""
    if status is None:
        rows = db.all("SELECT * FROM scope_requests WHERE connector_id = ? ORDER BY created_at", (connector,))
    else:
        rows = db.all("SELECT * FROM scope_requests WHERE connector_id = ? AND status = ? ORDER BY created_at",
                      (connector, status))
    return [_shape(r) for r in rows]


def wanted_scopes(db: Database, connector: str) -> tuple[str, ...]:
    """Every scope ``connector``'s pending requests need, in the order first asked (what its next sign-in asks
    for besides the granted ones)."""
    out: list[str] = []
    for r in of_connector(db, connector):
        out.extend(s for s in r["needed"] if s not in out)
    return tuple(out)


def settle(db: Database, connector: str, held: tuple[str, ...], now: float | None = None) -> list[ScopeRequest]:
    """A sign-in of ``connector`` now holds the scopes ``held``: every pending request they cover is
    ``granted``. Returns those requests."""
    done = [r for r in of_connector(db, connector) if set(r["needed"]) <= set(held)]
    if done:
        with db.write() as c:
            for r in done:
                c.execute("UPDATE scope_requests SET status = 'granted', answered_at = ?, answered_via = 'sign-in'"
                          " WHERE id = ? AND status = 'pending'", (time.time() if now is None else now, r["id"]))
    return [get(db, r["id"]) for r in done]


def decline(db: Database, request_id: str, via: str, reason: str | None = None,
            now: float | None = None) -> ScopeRequest:
    """The person declines ``request_id``: it is ``declined`` and its tool switched off, in one transaction.
    ``reason``: the person's words (kept with it). Raises NotFound, ApprovalError (not pending)."""
    found = get(db, request_id)
    with db.write() as c:
        r = c.execute("SELECT * FROM scope_requests WHERE id = ?", (request_id,)).fetchone()
        if r["status"] != "pending":
            raise ApprovalError(f"scope request {request_id} was already {r['status']}")
        why = f"it needs {' '.join(found['needed'])}, which you declined" + (f" ({reason})" if reason else "")
        c.execute("UPDATE scope_requests SET status = 'declined', reason = ?, answered_at = ?, answered_via = ?"
                  " WHERE id = ?", (why, time.time() if now is None else now, via, request_id))
        c.execute("UPDATE tools SET enabled = 0 WHERE connector_id = ? AND raw_name = ?",
                  (r["connector_id"], r["tool"]))
    return get(db, request_id)
