"""The audit log: every tool call with its decision and outcome (spec §10.3), hash-chained.

:func:`record` is the one insert: the row's hash over its content and the previous row's hash is
written in the same transaction, and so is the ``audit_head`` file (:mod:`palui.store.audit_chain`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.store import audit_chain
from palui.store.audit_chain import ALL_COLUMNS, Head, State
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import AuditHead, AuditRow


def record(db: Database, *, turn_id: str | None, tool: str, tool_class: str | None, class_source: str | None,
           origin: str, tainted: bool, verdict: str, reason: str, args_hash: str | None, outcome: str,
           duration_ms: float | None = None, client: str | None = None, session: str | None = None) -> None:
    """Append one audit row, chained to the one before. ``outcome``: ok, error, refused, asked, denied,
    cancelled; may have run… ``duration_ms`` in milliseconds. ``client`` and ``session``: the gateway client and
    session that made the call (spec §8.6), None for a turn's."""
    values = {"time": time.time(), "turn_id": turn_id, "tool": tool, "class": tool_class, "class_source": class_source,
              "origin": origin, "tainted": int(bool(tainted)), "verdict": verdict, "reason": reason,
              "args_hash": args_hash, "outcome": outcome,
              "duration_ms": None if duration_ms is None else float(duration_ms), "client": client, "session": session}
    with db.write() as c:
        audit_chain.append(c, values, audit_chain.head_path(db.path))


def rows(db: Database, turn_id: str | None = None, limit: int = 500) -> list[AuditRow]:
    """Audit rows oldest first: ``[{"time","turn","tool","class","class_source","origin","tainted","verdict",
    "reason","args_hash","outcome","duration_ms","client","session"}]`` (``client``, ``session``: a gateway call's,
    else None)."""
    sql = "SELECT * FROM audit"
    params: tuple[str, ...] = ()
    if turn_id:
        sql += " WHERE turn_id = ?"
        params = (turn_id,)
    sql = f"SELECT * FROM ({sql} ORDER BY id DESC LIMIT {int(limit)}) ORDER BY id"
    return [{
        "id": r["id"], "time": datetime.fromtimestamp(r["time"], UTC).isoformat(), "turn": r["turn_id"],
        "tool": r["tool"],
        "class": r["class"], "class_source": r["class_source"], "origin": r["origin"], "tainted": bool(r["tainted"]),
        "verdict": r["verdict"], "reason": r["reason"], "args_hash": r["args_hash"], "outcome": r["outcome"],
        "duration_ms": r["duration_ms"], "hash": r["hash"], "client": r["client"], "session": r["session"],
    } for r in db.all(sql, params)]


def head(db: Database) -> AuditHead | None:
    """The chain's head as the table has it: ``{"id", "hash"}`` of the last row, None when empty."""
    r = db.one("SELECT id, hash FROM audit WHERE id = (SELECT MAX(id) FROM audit)")
    return {"id": r["id"], "hash": r["hash"]} if r else None


def verify(db: Database, noted: str | None = None) -> dict[str, Any]:
    """``palui audit verify``: :func:`palui.store.audit_chain.verify` over every row, against the
    ``audit_head`` file and the ``noted`` hash, then against the ``audit_state`` row and the tool calls
    the turns' events record (:func:`palui.store.audit_chain.check_state`: an emptied log does not
    verify). Adds ``"head_file"``: the file's head, or None. A missing or unreadable head file while rows
    exist is a problem (``kind`` ``no_head``) unless a ``noted`` hash is given. A last write interrupted
    between the head and the commit (the state agrees with the table) is no problem: ``"interrupted":
    {"row", "message"}`` says so; when the state counted that row, it was deleted: ``missing_at_end``."""
    path = audit_chain.head_path(db.path)
    try:
        file_head: Head | None = audit_chain.read_head(path)
        unreadable = None
    except (OSError, ValueError) as e:
        file_head, unreadable = None, str(e)
    cur = db._connect().cursor()
    cur.row_factory = None  # plain tuples: 100,000 rows are verified in well under 2 s
    rows = cur.execute(f"SELECT {', '.join(ALL_COLUMNS)}, prev_hash, hash, chain_version FROM audit ORDER BY id")
    result = audit_chain.verify(rows, file_head, noted)
    result["head_file"] = {"id": file_head.id, "hash": file_head.hash} if file_head else None
    if result["ok"]:
        state = _state(db)
        problem = audit_chain.check_state(result, state, _tool_calls(db))
        interrupted = result.pop("interrupted", None)
        if problem is not None and interrupted is not None and file_head is not None:
            # The state counted the head's row: it was committed, then deleted by hand.
            problem = {"kind": "missing_at_end", "row": file_head.id,
                       "message": f"row {file_head.id} missing at the end: deleted (the head is row {file_head.id})"}
        if problem is not None:
            result["ok"], result["problem"] = False, problem
        elif interrupted is not None:
            result["interrupted"] = interrupted
    if result["ok"] and file_head is None and result["rows"] and not noted:
        what = f"the audit_head file cannot be read ({unreadable})" if unreadable else "the audit_head file is missing"
        result["ok"] = False
        result["problem"] = {"kind": "no_head", "row": None,
                             "message": f"{what}: rows deleted at the end would not show; give --head HASH"}
    return result


def _state(db: Database) -> State | None:
    r = db.one("SELECT rows, first_id, last_id, last_hash FROM audit_state WHERE id = 1")
    return State(r["rows"], r["first_id"], r["last_id"], r["last_hash"]) if r else None


def _tool_calls(db: Database) -> int:
    """The tool calls the turns' stored events record (each was audited before its event was stored).
    Reads every event once: ``verify`` is a check run by hand, not on a turn's path."""
    return int(db.row("SELECT COUNT(*) FROM turn_events WHERE json_extract(event, '$.type') = 'tool_call'")[0])


def export(db: Database, since: float | None = None) -> Iterator[dict[str, Any]]:
    """Rows oldest first with their hashes, exactly as hashed (``time`` epoch seconds, ``tainted`` 0/1),
    plus ``time_iso``; only rows at or after ``since`` (epoch seconds) when given."""
    cur = db._connect().cursor()
    cur.row_factory = None
    cols = [*ALL_COLUMNS, "prev_hash", "hash", "chain_version"]
    sql = f"SELECT {', '.join(cols)} FROM audit" + (" WHERE time >= ?" if since is not None else "") + " ORDER BY id"
    for r in cur.execute(sql, () if since is None else (since,)):
        row = dict(zip(cols, r, strict=True))
        row["time_iso"] = datetime.fromtimestamp(row["time"], UTC).isoformat()
        yield row
