"""The SQLite connection, migrations and the one write path (spec §10).

Every write in Palui goes through :meth:`Database.write`, a ``BEGIN IMMEDIATE``
transaction: it takes SQLite's write lock up front, so read-modify-write sequences
(compare-and-set on a turn, cap counters) cannot interleave between processes.

Durability (docs/decisions/0189-a-durable-turn-in-few-transactions.md): the database is in WAL mode with
``synchronous = NORMAL``, so a commit survives a crash of the process but not always a power cut. A write opened
with ``durable=True`` (a claim, an answer, a turn's end) survives a power cut too: its connection switches to
``synchronous = FULL`` before ``BEGIN`` and back to ``NORMAL`` after the commit (SQLite does not take the switch
inside a transaction), so the commit syncs the WAL; a durable write nested in a write that is not syncs the WAL
file itself once the outer one commits. Files written beside a transaction (the audit head) are synced with it
(:meth:`Database.sync_with_commit`).
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from palui.store.migrations import MIGRATIONS

BUSY_TIMEOUT_MS = 30_000
_savepoints = itertools.count(1)


class Database:
    """One SQLite database file in WAL mode.

    Args:
        path: the database file; its directory is created if missing.

    Reads use :meth:`read` / :meth:`one` / :meth:`all`; writes use :meth:`write`.
    Safe to use from several threads of one process (one connection per thread)
    and from several processes (WAL + busy timeout).
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        #: Per-process caches of what was read from this database, each checked against a stored
        #: version before use (the tool catalog, decoded history): never a source of truth.
        self.memo: dict[str, Any] = {}
        #: Files written beside commits that were not durable (:meth:`sync_with_commit`): the next durable commit
        #: syncs them, so they reach the disk with the rows that a durable commit's WAL sync carries.
        self._unsynced: set[Path] = set()
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
        return conn

    def _migrate(self) -> None:
        with self.write() as c:
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (number INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in c.execute("SELECT number FROM schema_migrations")}
            for number, name, sql in sorted(MIGRATIONS, key=lambda m: m[0]):
                if number in done:
                    continue
                if callable(sql):  # a migration that needs Python (e.g. the Unicode tables)
                    sql(c)
                else:
                    for statement in _split(sql):
                        c.execute(statement)
                c.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time()))

    @contextmanager
    def write(self, durable: bool = False) -> Iterator[sqlite3.Connection]:
        """The one write path: a ``BEGIN IMMEDIATE`` transaction, committed on success.

        A write opened inside another write of the same thread is a savepoint of the outer
        transaction: it commits with it, and its own failure rolls back only its changes. A chat
        channel records an update's id and the turn or answer it caused this way, in one
        transaction (spec §8.3: each update is processed once). The body of a write never awaits.
        ``durable``: the commit survives a power cut, not only a crash (the module's docstring says how);
        nested, it makes the outer transaction's commit durable.
        """
        conn = self._connect()
        if conn.in_transaction:
            if durable:
                self._local.durable = True
            name = f"nested_{next(_savepoints)}"
            conn.execute(f"SAVEPOINT {name}")
            try:
                yield conn
            except BaseException:
                conn.execute(f"ROLLBACK TO {name}")
                conn.execute(f"RELEASE {name}")
                raise
            else:
                conn.execute(f"RELEASE {name}")
            return
        if durable:
            conn.execute("PRAGMA synchronous = FULL")
        try:
            conn.execute("BEGIN IMMEDIATE")
            self._local.after, self._local.durable, self._local.sync = [], False, set()
            try:
                yield conn
            except BaseException:
                self._local.after = self._local.sync = None
                conn.execute("ROLLBACK")
                raise
            after, self._local.after = self._local.after, None
            nested_durable, sync, self._local.sync = self._local.durable, self._local.sync, None
            conn.execute("COMMIT")
        finally:
            if durable:
                conn.execute("PRAGMA synchronous = NORMAL")
        if durable or nested_durable:
            if nested_durable and not durable:
                sync.add(Path(f"{self.path}-wal"))  # this commit was not synced by SQLite: the WAL now
            sync |= self._unsynced
            self._unsynced = set()
            for path in sync:
                _fsync(path)
        else:
            self._unsynced |= sync
        for fn in after:
            fn()

    def sync_with_commit(self, path: Path) -> None:
        """Sync ``path`` (a file written beside the open write, the audit head) to disk with the first durable
        commit from this one on (this one's, when it is durable); nothing outside a write."""
        sync: set[Path] | None = getattr(self._local, "sync", None)
        if sync is not None:
            sync.add(path)

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the write open on this thread commits (never if it rolls back), or now when no
        write is open: what others are told about a change (the person's channel waking the chat channels)
        happens after it is stored, never before (spec §8.3). A savepoint rolled back inside the write keeps
        what it registered: use it for wake-ups, which are harmless when nothing changed."""
        waiting: list[Callable[[], None]] | None = getattr(self._local, "after", None)
        if waiting is None:
            fn()
        else:
            waiting.append(fn)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One consistent read of several statements: a deferred transaction (WAL gives it one
        snapshot from its first SELECT), always rolled back, so nothing is ever written through it.
        Inside a transaction already open on this thread (a :meth:`write`), it simply joins it."""
        conn = self._connect()
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("ROLLBACK")

    def one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        return self._connect().execute(sql, params).fetchone()

    def row(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row:
        """The first row of a query that always yields one (an aggregate such as ``COUNT(*)``)."""
        r = self.one(sql, params)
        if r is None:
            raise LookupError(f"the query yielded no row: {sql[:80]}")
        return r

    def all(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        return self._connect().execute(sql, params).fetchall()

    def backup(self, target: Path | str) -> Path:
        """Copy the whole database into the new file ``target`` with SQLite's online backup API: a
        consistent snapshot, safe while other connections and processes read and write (WAL), which
        never wait for it. Written to a temporary file beside ``target`` (mode 0600) and linked into
        place once complete and checked (``PRAGMA quick_check``): the link fails if anything
        (a file, a symlink, another backup) took the name meanwhile, so nothing is replaced. Returns ``target``.

        Raises FileExistsError when ``target`` exists, OSError when it cannot be written, and
        sqlite3.DatabaseError when the copy does not check.
        """
        import os

        target = Path(target)
        if os.path.lexists(target):  # a dangling symlink too
            raise FileExistsError(str(target))
        tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        try:
            dst = sqlite3.connect(tmp)
            try:
                self._connect().backup(dst)  # one step: the pages of one snapshot
                ok = dst.execute("PRAGMA quick_check").fetchone()[0]
                if ok != "ok":
                    raise sqlite3.DatabaseError(f"the copy does not check: {ok}")
                dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
            finally:
                dst.close()
            try:
                os.link(tmp, target)  # creates target, or fails if anything is there now: never replaces
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: the check and rename of before
                if os.path.lexists(target):
                    raise FileExistsError(str(target)) from None
                os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return target

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _fsync(path: Path) -> None:
    """Flush ``path``'s written data to disk (a missing file has nothing to flush: a checkpoint that removed the
    WAL synced it first)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fdatasync(fd)  # the data and the size that reads it back, as SQLite syncs on Linux
    finally:
        os.close(fd)


def _split(sql: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
