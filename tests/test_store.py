"""The SQLite store: one file, WAL, numbered migrations applied once (spec §10)."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from palui.store import db as db_module
from palui.store.db import Database
from palui.store.migrations import MIGRATIONS


def test_migration_numbers_increase():
    numbers = [n for n, _, _ in MIGRATIONS]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1


def test_wal_and_migrations_recorded_once(tmp_path):
    path = tmp_path / "d" / "palui.db"
    first = Database(path)
    assert first.one("PRAGMA journal_mode")[0] == "wal"
    recorded = [tuple(r) for r in first.all("SELECT number, name, applied_at FROM schema_migrations ORDER BY number")]
    assert [r[0] for r in recorded] == [n for n, _, _ in MIGRATIONS]
    first.close()

    # A second open applies nothing again: the table is unchanged (and a re-run of
    # migration 1's plain CREATE TABLE statements would have failed).
    second = Database(path)
    again = [tuple(r) for r in second.all("SELECT number, name, applied_at FROM schema_migrations ORDER BY number")]
    assert again == recorded
    assert second.one("PRAGMA journal_mode")[0] == "wal"
    second.close()


def test_new_migration_applied_on_next_open(tmp_path, monkeypatch):
    path = tmp_path / "palui.db"
    Database(path).close()
    extra = (10_000, "test table", "CREATE TABLE test_extra (x INTEGER);")
    monkeypatch.setattr(db_module, "MIGRATIONS", [*MIGRATIONS, extra])
    d = Database(path)
    assert d.one("SELECT name FROM schema_migrations WHERE number = 10000")[0] == "test table"
    assert d.all("SELECT * FROM test_extra") == []
    d.close()


def test_failed_migration_leaves_nothing_half_done(tmp_path, monkeypatch):
    path = tmp_path / "palui.db"
    Database(path).close()
    broken = (10_001, "broken", "CREATE TABLE half_done (x INTEGER);\nTHIS IS NOT SQL;")
    monkeypatch.setattr(db_module, "MIGRATIONS", [*MIGRATIONS, broken])
    with pytest.raises(sqlite3.Error):
        Database(path)
    monkeypatch.setattr(db_module, "MIGRATIONS", MIGRATIONS)
    d = Database(path)
    assert d.one("SELECT 1 FROM sqlite_master WHERE name = 'half_done'") is None
    assert d.one("SELECT 1 FROM schema_migrations WHERE number = 10001") is None
    d.close()


def test_concurrent_first_opens_migrate_once(tmp_path):
    path = tmp_path / "palui.db"
    errors: list[BaseException] = []

    def open_it():
        try:
            Database(path).close()
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    d = Database(path)
    assert d.one("SELECT COUNT(*) FROM schema_migrations")[0] == len(MIGRATIONS)
    d.close()


def test_write_rolls_back_on_error(tmp_path):
    d = Database(tmp_path / "palui.db")
    with pytest.raises(RuntimeError):
        with d.write() as c:
            c.execute("INSERT INTO kv (key, value) VALUES ('a', '1')")
            raise RuntimeError("boom")
    assert d.one("SELECT * FROM kv WHERE key = 'a'") is None
    with d.write() as c:
        c.execute("INSERT INTO kv (key, value) VALUES ('a', '1')")
    assert d.one("SELECT value FROM kv WHERE key = 'a'")[0] == "1"
    d.close()


def test_service_keeps_one_database_file(svc, home):
    svc.tools.register("mcp-x", [])
    svc.notifier("notice", "hello")
    dbs = sorted(p.name for p in home.rglob("*") if p.is_file() and ".db" in p.name)
    # palui.db plus SQLite's own WAL sidecar files; no second database.
    assert {n for n in dbs if not n.endswith(("-wal", "-shm"))} == {"palui.db"}
