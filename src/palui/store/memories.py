"""Queries for the ``memories`` and ``tasks`` tables, with provenance (spec §4, §7).

Every memory and task carries a provenance word: ``trusted`` or ``untrusted``. A row
written while its turn was tainted is ``untrusted`` (taint follows data into storage);
reading it back taints the reading turn until the person marks it trusted. All writes
go through :meth:`Database.write`, the one write path (spec §10).

Rows are returned as plain dicts; times are Unix seconds (float).
"""

from __future__ import annotations

import re
import time
from typing import Any

from palui.store.db import Database

TRUSTED = "trusted"
UNTRUSTED = "untrusted"
TASK_STATUSES = ("open", "done")

# Word characters in any script: what FTS5's unicode61 tokenizer would index anyway.
_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str | None:
    """Turn arbitrary text into a safe FTS5 ``MATCH`` expression, or None if it has no words.

    Each word becomes a quoted string (so ``AND``, ``OR``, ``NEAR``, ``*``, ``"``,
    ``:`` and parentheses are plain text, never syntax) with a prefix ``*`` so that
    "shop" finds "shopping". Words are joined with ``OR`` and the caller ranks by
    bm25: a memory matching more words comes first, one matching any word still counts.
    """
    words = _WORD.findall(text or "")
    if not words:
        return None
    # \w never matches '"', but double any quote anyway: the quoting must hold by construction.
    return " OR ".join('"' + w.replace('"', '""') + '"*' for w in words[:32])


def _memory(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in ("id", "text", "provenance", "source", "turn_id", "created_at")}


def add_memory(db: Database, text: str, provenance: str, source: str | None, turn_id: str | None) -> int:
    """Store a memory; returns its id."""
    with db.write() as c:
        cur = c.execute("INSERT INTO memories (text, provenance, source, turn_id, created_at) VALUES (?,?,?,?,?)",
                        (text, provenance, source, turn_id, time.time()))
        return int(cur.lastrowid or 0)


def get_memory(db: Database, memory_id: int) -> dict[str, Any] | None:
    row = db.one("SELECT * FROM memories WHERE id = ?", (memory_id,))
    return _memory(row) if row else None


def recent_memories(db: Database, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` memories, newest first."""
    return [_memory(r) for r in db.all("SELECT * FROM memories ORDER BY id DESC LIMIT ?", (limit,))]


def search_memories(db: Database, query: str, limit: int) -> list[dict[str, Any]]:
    """Memories matching ``query`` (best first, by bm25), or the newest ones when it has no words.

    Never raises on the query's content: it is quoted by :func:`fts_query`.
    """
    match = fts_query(query)
    if match is None:
        return recent_memories(db, limit)
    rows = db.all(
        "SELECT m.* FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid"
        " WHERE memories_fts MATCH ? ORDER BY bm25(memories_fts), m.id DESC LIMIT ?",
        (match, limit),
    )
    return [_memory(r) for r in rows]


def delete_memory(db: Database, memory_id: int) -> dict[str, Any] | None:
    """Delete a memory; returns the deleted row, or None when there was none."""
    with db.write() as c:
        row = c.execute("SELECT * FROM memories WHERE id = ?", (memory_id,)).fetchone()
        if row is None:
            return None
        c.execute("DELETE FROM memories WHERE id = ?", (memory_id,))
        return _memory(row)


def trust_memory(db: Database, memory_id: int) -> bool:
    """Mark a memory trusted (the person vouched for it, spec §4). False when unknown."""
    with db.write() as c:
        return c.execute("UPDATE memories SET provenance = ? WHERE id = ?", (TRUSTED, memory_id)).rowcount > 0


# -- tasks ------------------------------------------------------------------------------------

_TASK_FIELDS = ("id", "title", "notes", "status", "due", "provenance", "source", "turn_id", "created_at",
                "updated_at")


def _task(row: Any) -> dict[str, Any]:
    return {k: row[k] for k in _TASK_FIELDS}


def list_tasks(db: Database, status: str = "open") -> list[dict[str, Any]]:
    """Tasks with ``status`` ``open``, ``done`` or ``all``: open ones by due date (none last), then id."""
    if status == "all":
        rows = db.all("SELECT * FROM tasks ORDER BY status DESC, due IS NULL, due, id")
    else:
        rows = db.all("SELECT * FROM tasks WHERE status = ? ORDER BY due IS NULL, due, id", (status,))
    return [_task(r) for r in rows]


def get_task(db: Database, task_id: int) -> dict[str, Any] | None:
    row = db.one("SELECT * FROM tasks WHERE id = ?", (task_id,))
    return _task(row) if row else None


def create_task(db: Database, title: str, notes: str, due: str | None, provenance: str, source: str | None,
                turn_id: str | None) -> dict[str, Any]:
    """Store an open task; returns it."""
    now = time.time()
    with db.write() as c:
        cur = c.execute(
            "INSERT INTO tasks (title, notes, status, due, provenance, source, turn_id, created_at, updated_at)"
            " VALUES (?,?,?,?,?,?,?,?,?)",
            (title, notes, "open", due, provenance, source, turn_id, now, now),
        )
        return _task(c.execute("SELECT * FROM tasks WHERE id = ?", (cur.lastrowid,)).fetchone())


def update_task(db: Database, task_id: int, changes: dict[str, Any], tainted: bool, source: str | None,
                turn_id: str | None) -> dict[str, Any] | None:
    """Change a task's title/notes/due/status; returns the new row, or None when unknown.

    A change made in a tainted turn makes the task ``untrusted``; a change made in a
    clean turn leaves its provenance as it was (the untouched fields may still be
    third-party text, so only the person can clear it).
    """
    allowed = {k: v for k, v in changes.items() if k in ("title", "notes", "due", "status")}
    with db.write() as c:
        if c.execute("SELECT 1 FROM tasks WHERE id = ?", (task_id,)).fetchone() is None:
            return None
        sets = [f"{k} = ?" for k in allowed] + ["updated_at = ?"]
        params: list[Any] = [*allowed.values(), time.time()]
        if tainted:
            sets += ["provenance = ?", "source = ?", "turn_id = ?"]
            params += [UNTRUSTED, source, turn_id]
        c.execute(f"UPDATE tasks SET {', '.join(sets)} WHERE id = ?", (*params, task_id))
        return _task(c.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone())


def delete_task(db: Database, task_id: int) -> dict[str, Any] | None:
    """Delete a task; returns the deleted row, or None when there was none."""
    with db.write() as c:
        row = c.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        c.execute("DELETE FROM tasks WHERE id = ?", (task_id,))
        return _task(row)


def trust_task(db: Database, task_id: int) -> bool:
    """Mark a task trusted (spec §4). False when unknown."""
    with db.write() as c:
        return c.execute("UPDATE tasks SET provenance = ? WHERE id = ?", (TRUSTED, task_id)).rowcount > 0
