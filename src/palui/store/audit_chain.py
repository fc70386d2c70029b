"""The audit log's hash chain (spec §10.3): a row nobody can quietly edit, insert or delete.

Each audit row carries ``prev_hash`` (the previous row's ``hash``; the first row's is
:data:`GENESIS`) and ``hash``::

    hash = SHA-256 hex of ( prev_hash + "\\n" + canonical(row) )
    canonical(row) = JSON array of the row's CHAINED columns, in that order,
                     with ensure_ascii and separators (",", ":")

The row id is part of what is hashed, so renumbering rows shows too.

**Chain versions.** Each row has a ``chain_version`` naming the columns its hash covers
(:data:`COLUMNS`). Version 1 is the canonical form above, unchanged since the chain began, so rows
written before a column was added keep verifying. A later version lists its columns after version 1's,
and its canonical array starts with the version number: ``[version, *columns]``, so a row cannot be
relabelled from one version to another without its hash failing. Version 2 adds the gateway's
``client`` and ``session`` (spec §8.6); every row is written at :data:`CURRENT_VERSION`.

**The audit's state** (table ``audit_state``, one row): the number of rows ever written, the first row
and the last row's id and hash, updated by :func:`append` in the inserting transaction. The log is
never pruned, so a log that holds fewer rows than counted, or ends elsewhere, lost rows; an emptied
log with its head file removed still disagrees with it (``palui audit verify``). The chain's head (the
last row's id and hash) is also written to the file ``audit_head`` beside the database (mode
0600, ``{"id": N, "hash": "…", "prev": {"id": N-1, "hash": "…"}}`` padded to a fixed length) inside the
inserting transaction, while SQLite's write lock is held, so two processes never write it out of order
(docs/decisions/0133). ``prev`` is the head before this row: the row the new one is chained to. A new
row's id is one past the larger of the table's last id, the state's and the head's id: after the last
rows were deleted, a later row leaves a gap that :func:`verify` names, instead of reusing the deleted
ids; only a head whose ``prev`` is the table's last row (its own row never committed) gives its id back.

What :func:`verify` shows: a row whose content was changed (its hash no longer matches), a row
inserted (with no hash, or one the next row does not link to), rows deleted (a gap in the ids,
or rows missing at the end compared with the head), rows added after the head. What it cannot
show: a rewrite by someone who also rewrites the head file (and, with ``--head``, cannot make
the chain contain a hash the person noted elsewhere).

**The last write interrupted.** The head is written before the transaction commits: a crash, a kill or a
full disk between the two leaves the head one row ahead of a table that ends exactly at the head's
``prev``. :func:`verify` reports that as ``interrupted`` ("the last audit write was interrupted (row N
never committed)"), not as rows missing, while the ``audit_state`` row (rolled back with the row) agrees
with the table; a last row deleted by hand leaves the state one row ahead and is reported missing.
``PALUI_TEST_AUDIT_HOLD`` (tests only) makes :func:`append` stop between the two, so a test can kill the
process there.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GENESIS = "0" * 64
#: The columns a row's hash covers, in this order.
CHAINED = ("id", "time", "turn_id", "tool", "class", "class_source", "origin", "tainted", "verdict", "reason",
           "args_hash", "outcome", "duration_ms")
#: The columns each chain version's hash covers (see the module docstring); version 1 is CHAINED, version 2 adds
#: the gateway's ``client`` and ``session`` (spec §8.6: NULL on a turn's row).
COLUMNS: dict[int, tuple[str, ...]] = {1: CHAINED, 2: (*CHAINED, "client", "session")}
CURRENT_VERSION = 2
#: Every version's columns, version 1's first: the row layout :func:`verify` reads.
ALL_COLUMNS: tuple[str, ...] = tuple(dict.fromkeys(col for v in sorted(COLUMNS) for col in COLUMNS[v]))
_PICK = {v: [ALL_COLUMNS.index(col) for col in cols] for v, cols in COLUMNS.items()}
HEAD_FILE = "audit_head"
HEAD_BYTES = 256  # the head file's fixed length (128 before it carried the previous head: still read)
#: Tests only: a file path; :func:`append` writes its pid there after the head and waits to be killed.
HOLD_ENV = "PALUI_TEST_AUDIT_HOLD"
_dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode


@dataclass(frozen=True)
class Head:
    """The chain's head: the last row's ``id`` and ``hash``; ``prev`` the head before it (id 0 and
    :data:`GENESIS` before the first row), None in a head file written before it carried one."""

    id: int
    hash: str
    prev: Head | None = None


def row_hash(prev_hash: str, values: Sequence[Any], version: int = 1) -> str:
    """The hash of a row of chain ``version`` whose :data:`COLUMNS` values are ``values`` (see the module
    docstring: version 1 hashes the values alone, a later version ``[version, *values]``)."""
    canonical = list(values) if version == 1 else [version, *values]
    return hashlib.sha256(f"{prev_hash}\n{_dumps(canonical)}".encode()).hexdigest()


def head_path(db_file: Path | str) -> Path:
    """The ``audit_head`` file of the database at ``db_file`` (the same directory)."""
    return Path(db_file).with_name(HEAD_FILE)


def read_head(path: Path) -> Head | None:
    """The head stored in ``path``; None when there is no file. Raises ValueError when it is not a head."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    data = json.loads(raw)
    head = _head(data)
    if head is None:
        raise ValueError(f"{path} is not an audit head")
    prev = data.get("prev")
    if prev is not None:
        before = _head(prev)
        if before is None:
            raise ValueError(f"{path} is not an audit head")
        head = Head(head.id, head.hash, before)
    return head


def _head(data: Any) -> Head | None:
    ok = isinstance(data, dict) and isinstance(data.get("id"), int) and isinstance(data.get("hash"), str)
    return Head(data["id"], data["hash"]) if ok else None


def write_head(path: Path, head: Head) -> None:
    """Write ``head`` (with its ``prev``) into ``path`` (created with mode 0600).

    The record has a fixed length (:data:`HEAD_BYTES`, JSON padded with spaces) and is written in place
    with one ``pwrite``: no truncation and no rename, which on ext4 would each flush the file to disk
    and cost a millisecond per audit row (bench/audit.py). Writers are serialised by SQLite's write
    lock; a crash in the middle of this one small write can leave an unreadable head, which
    ``palui audit verify`` reports."""
    record: dict[str, Any] = {"id": head.id, "hash": head.hash}
    if head.prev is not None:
        record["prev"] = {"id": head.prev.id, "hash": head.prev.hash}
    data = _dumps(record).ljust(HEAD_BYTES - 1).encode() + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
        if os.fstat(fd).st_size > HEAD_BYTES:
            os.ftruncate(fd, HEAD_BYTES)
        os.pwrite(fd, data, 0)
    finally:
        os.close(fd)


def _known_head(path: Path) -> Head | None:
    try:
        return read_head(path)
    except (OSError, ValueError):
        return None  # an unreadable head never stops the audit; verify reports it


def append(c: sqlite3.Connection, values: dict[str, Any], head_file: Path) -> Head:
    """Insert one audit row (``values`` has every CHAINED column but ``id``) chained to the last one,
    on connection ``c`` inside the caller's write transaction, and write the head file (with the head
    before it). Returns the new head."""
    last = c.execute("SELECT id, hash FROM audit WHERE id = (SELECT MAX(id) FROM audit)").fetchone()
    before = Head(last[0], last[1] or GENESIS) if last else Head(0, GENESIS)
    known = _known_head(head_file)
    if known is not None and known.prev == before and known.id > before.id:
        known = None  # the last write was interrupted: its row never committed, its id is free again
    state = c.execute("SELECT last_id FROM audit_state WHERE id = 1").fetchone()
    new_id = max(before.id, known.id if known else 0, (state[0] or 0) if state else 0) + 1
    prev = before.hash
    row = [new_id, *(values[k] for k in COLUMNS[CURRENT_VERSION][1:])]
    h = row_hash(prev, row, CURRENT_VERSION)
    cols = COLUMNS[CURRENT_VERSION]
    c.execute(f"INSERT INTO audit ({', '.join(cols)}, prev_hash, hash, chain_version)"
              f" VALUES ({', '.join('?' * (len(cols) + 3))})", (*row, prev, h, CURRENT_VERSION))
    # No row (deleted by hand) is not made again: verify reports it, a fresh count would hide the deletion.
    c.execute("UPDATE audit_state SET rows = rows + 1, first_id = COALESCE(first_id, ?), last_id = ?, last_hash = ?"
              " WHERE id = 1", (new_id, new_id, h))
    head = Head(new_id, h, before)
    write_head(head_file, head)
    _hold_if_testing()
    return head


def _hold_if_testing() -> None:
    """Tests only (:data:`HOLD_ENV`): the head is written, the transaction not committed; write this
    process's pid into the named file and wait to be killed (at most 10 minutes)."""
    hold = os.environ.get(HOLD_ENV)
    if not hold:
        return
    import time

    Path(hold).write_text(str(os.getpid()), encoding="utf-8")
    time.sleep(600)


def chain_existing(c: sqlite3.Connection) -> None:
    """Migration: chain the rows written before the chain existed, in id order, and write the head
    file beside the database (rows that already have a hash are left as they are)."""
    prev = GENESIS
    last: Head | None = None
    rows = c.execute(f"SELECT {', '.join(CHAINED)}, hash FROM audit ORDER BY id").fetchall()
    for r in rows:
        values = [r[i] for i in range(len(CHAINED))]
        h = r[len(CHAINED)] or row_hash(prev, values)
        if r[len(CHAINED)] is None:
            c.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", (prev, h, values[0]))
        prev, last = h, Head(values[0], h)
    db_file = next((r[2] for r in c.execute("PRAGMA database_list").fetchall() if r[1] == "main"), "")
    if last is not None and db_file:
        write_head(head_path(db_file), last)


def _span(a: int, b: int) -> str:
    return f"row {a}" if a == b else f"rows {a}–{b}"


def verify(rows: Iterable[Sequence[Any]], head: Head | None, noted: str | None = None) -> dict[str, Any]:
    """Check the chain over ``rows`` (tuples of the :data:`ALL_COLUMNS` values, then ``prev_hash``, ``hash``
    and optionally ``chain_version`` (1 when absent), in id order) against ``head`` (the head file's) and
    ``noted`` (a hash, or a prefix of 16+ hex digits, the person noted, e.g. from ``/status`` or the daily
    post).

    Returns ``{"ok", "rows", "first": id | None, "last": {"id","hash"} | None, "problem": None |
    {"kind","row","message"}}``, and ``"interrupted": {"row","message"}`` when the table ends exactly at
    the head's previous head (the head's row never committed; see the module docstring);
    ``kind`` is ``changed``, ``inserted``, ``deleted``, ``missing_at_end``, ``after_head`` or
    ``noted_not_found``. The first problem found is reported: the first row that was changed, inserted or
    deleted, else a disagreement with the head.
    """
    n = 0
    last_id, last_hash, before_last = 0, GENESIS, GENESIS
    noted_at: int | None = None
    first_id: int | None = None
    noted = noted.lower() if noted else None
    width = len(ALL_COLUMNS)

    def out(kind: str | None = None, row: int | None = None, message: str = "") -> dict[str, Any]:
        problem = None if kind is None else {"kind": kind, "row": row, "message": message}
        return {"ok": problem is None, "rows": n, "problem": problem, "first": first_id,
                "last": {"id": last_id, "hash": last_hash} if n else None}

    for r in rows:
        rid, stored_prev, stored = r[0], r[width], r[width + 1]
        if stored is None or stored_prev is None:
            return out("inserted", rid, f"row {rid} has no hash: it was inserted outside Palui's audit")
        if rid != last_id + 1:
            return out("deleted", last_id + 1, f"{_span(last_id + 1, rid - 1)} missing: deleted "
                                               f"(row {rid} follows row {last_id})" if last_id else
                       f"{_span(1, rid - 1)} missing: deleted (the log starts at row {rid})")
        if stored_prev != last_hash:
            if n >= 1 and stored_prev == before_last:
                return out("inserted", last_id, f"row {last_id} was inserted: row {rid} links to the row before it")
            if n == 0:
                return out("changed", rid, f"row {rid} was changed: it does not start the chain")
            return out("changed", last_id, f"row {last_id} was changed: row {rid} no longer links to it")
        version = r[width + 2] if len(r) > width + 2 else 1
        if version not in _PICK:
            return out("changed", rid, f"row {rid} was changed: it names chain version {version}, which Palui never "
                                       "wrote")
        if row_hash(stored_prev, [r[i] for i in _PICK[version]], version) != stored:
            return out("changed", rid, f"row {rid} was changed: its content does not match its hash")
        before_last, last_hash, last_id = last_hash, stored, rid
        first_id = rid if first_id is None else first_id
        n += 1
        if noted and noted_at is None and stored.startswith(noted):
            noted_at = rid
    if head is not None:
        if last_id < head.id and head.prev == Head(last_id, last_hash):
            # The head was written and its transaction never committed (a crash between the two): the table
            # ends exactly where the head's own previous head was. The audit_state row tells it from a last
            # row deleted by hand (palui.runner.audit.verify).
            result = out()
            result["interrupted"] = {"row": head.id, "message": f"the last audit write was interrupted (row "
                                                                f"{head.id} never committed)"}
            return result
        if last_id < head.id:
            return out("missing_at_end", last_id + 1,
                       f"{_span(last_id + 1, head.id)} missing at the end: deleted (the head is row {head.id})")
        if last_id > head.id:
            return out("after_head", head.id + 1,
                       f"{_span(head.id + 1, last_id)} inserted after the head (row {head.id})")
        if last_hash != head.hash:
            return out("changed", head.id, f"row {head.id} does not have the head's hash: the log was changed and "
                                           "chained again at or before that row")
    if noted and noted_at is None:
        return out("noted_not_found", None, f"no row has the noted hash {noted}: a row at or before the one it "
                                            "named was changed or deleted")
    return out()


@dataclass(frozen=True)
class State:
    """The ``audit_state`` row: ``rows`` written ever, the ``first_id``, the ``last_id`` and its ``last_hash``."""

    rows: int
    first_id: int | None
    last_id: int | None
    last_hash: str | None


def check_state(result: dict[str, Any], state: State | None, tool_calls: int) -> dict[str, Any] | None:
    """The first disagreement between a chain that verified (``result`` of :func:`verify`), the
    ``audit_state`` row and the ``tool_calls`` the turns' events record (every one is audited, spec
    §10.3), as a problem ``{"kind","row","message"}``; None when they agree.

    ``kind``: ``emptied`` (no rows but calls recorded), ``no_state`` (the row was deleted),
    ``count`` (fewer or more rows than written), ``state_head`` (the log ends elsewhere than the row
    last written), ``calls`` (more calls recorded than rows)."""
    n, last = result["rows"], result["last"]
    if n == 0 and tool_calls:
        counted = f"; the audit counted {state.rows} row(s) up to row {state.last_id}" if state and state.rows else ""
        return {"kind": "emptied", "row": None,
                "message": f"audit log empty but {tool_calls} tool call(s) recorded in the turns{counted}"}
    if state is None:
        return {"kind": "no_state", "row": None,
                "message": "the audit_state row is missing: it was deleted outside Palui, so deleted rows may not show"}
    if state.rows != n:
        what = "deleted" if n < state.rows else "inserted outside Palui's audit"
        return {"kind": "count", "row": None,
                "message": f"the log holds {n} row(s) but {state.rows} were written: rows were {what}"}
    if n and (state.first_id != result["first"] or state.last_id != last["id"]):
        return {"kind": "state_head", "row": state.last_id,
                "message": f"the log runs from row {result['first']} to row {last['id']} but rows {state.first_id}–"
                           f"{state.last_id} were written: it was renumbered and chained again"}
    if n and state.last_hash != last["hash"]:
        return {"kind": "state_head", "row": state.last_id,
                "message": f"row {state.last_id} does not have the hash it was written with: the log was changed "
                           "and chained again at or before that row"}
    if tool_calls > n:
        return {"kind": "calls", "row": None,
                "message": f"{tool_calls} tool call(s) recorded in the turns but the log holds {n} row(s): rows were "
                           "deleted"}
    return None
