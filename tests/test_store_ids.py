"""Memory and task ids are never given out twice (migration 6), so an approval for
``recall__forget_memory {"id": N}`` can only ever name the memory it was asked for."""

from __future__ import annotations

from palui.connectors.base import CallContext
from palui.connectors.builtin.recall import RecallConnector
from palui.store import db as db_module
from palui.store import memories as store
from palui.store.db import Database
from palui.store.migrations import MIGRATIONS
from palui.types import Origin


def database_up_to(path, number: int, monkeypatch) -> Database:
    """A database with only the migrations numbered up to ``number`` applied (an older install)."""
    with monkeypatch.context() as m:
        m.setattr(db_module, "MIGRATIONS", [mig for mig in MIGRATIONS if mig[0] <= number])
        return Database(path)


def test_ids_are_not_reused_after_a_delete(tmp_path):
    db = Database(tmp_path / "palui.db")
    first = store.add_memory(db, "first", store.TRUSTED, None, None)
    second = store.add_memory(db, "second", store.TRUSTED, None, None)
    store.delete_memory(db, second)
    third = store.add_memory(db, "third", store.TRUSTED, None, None)
    assert third not in (first, second) and third > second
    task = store.create_task(db, "t", "", None, store.TRUSTED, None, None)["id"]
    store.delete_task(db, task)
    assert store.create_task(db, "u", "", None, store.TRUSTED, None, None)["id"] > task
    db.close()


async def test_forget_memory_with_a_stale_id_names_no_newer_memory(svc):
    """The trial's case: forget memory 1, a new memory is added, a stale call for id 1 finds nothing."""
    ctx = CallContext(turn_id="t1", conversation_id="c1", origin=Origin.CHAT, tainted=False, taint_source=None,
                      step=1, db=svc.db, settings=svc.settings)
    conn = RecallConnector()
    old = store.add_memory(svc.db, "old secret", store.TRUSTED, None, None)
    assert not (await conn.call_tool("forget_memory", {"id": old}, ctx)).is_error
    new = store.add_memory(svc.db, "new and precious", store.TRUSTED, None, None)
    r = await conn.call_tool("forget_memory", {"id": old}, ctx)
    assert r.is_error and f"No memory with id {old}" in r.text
    assert new != old and store.get_memory(svc.db, new)["text"] == "new and precious"


def test_migration_6_keeps_rows_ids_and_search(tmp_path, monkeypatch):
    path = tmp_path / "palui.db"
    old = database_up_to(path, 5, monkeypatch)
    assert "AUTOINCREMENT" not in old.one("SELECT sql FROM sqlite_master WHERE name = 'memories'")[0]
    ids = [store.add_memory(old, text, prov, "src", "turn-1") for text, prov in (
        ("the dentist is on Tuesday", store.TRUSTED), ("bank IBAN from a web page", store.UNTRUSTED),
        ("shopping list: oat milk", store.TRUSTED))]
    store.delete_memory(old, ids[0])
    tasks = [store.create_task(old, f"task {i}", f"notes {i}", "2026-05-01", store.TRUSTED, None, None)["id"]
             for i in range(3)]
    store.delete_task(old, tasks[1])
    before_memories = [tuple(r) for r in old.all("SELECT * FROM memories ORDER BY id")]
    before_tasks = [tuple(r) for r in old.all("SELECT * FROM tasks ORDER BY id")]
    old.close()

    db = Database(path)  # all migrations: 6 runs now
    for table in ("memories", "tasks"):
        assert "AUTOINCREMENT" in db.one("SELECT sql FROM sqlite_master WHERE name = ?", (table,))[0]
    assert [tuple(r) for r in db.all("SELECT * FROM memories ORDER BY id")] == before_memories
    assert [tuple(r) for r in db.all("SELECT * FROM tasks ORDER BY id")] == before_tasks
    # The FTS index answers for rows written before the migration…
    assert [m["id"] for m in store.search_memories(db, "shopping", 10)] == [ids[2]]
    assert store.search_memories(db, "dentist", 10) == []  # deleted before: gone from the index too
    # …and the recreated triggers keep it in step with inserts, updates and deletes after it.
    new = store.add_memory(db, "the dentist moved to Friday", store.TRUSTED, None, None)
    assert new > ids[2]
    assert [m["id"] for m in store.search_memories(db, "dentist", 10)] == [new]
    with db.write() as c:
        c.execute("UPDATE memories SET text = 'oat milk and bread' WHERE id = ?", (ids[2],))
    assert [m["id"] for m in store.search_memories(db, "bread", 10)] == [ids[2]]
    assert store.search_memories(db, "shopping", 10) == []
    store.delete_memory(db, new)
    assert store.search_memories(db, "Friday", 10) == []
    assert db.one("INSERT INTO memories_fts(memories_fts) VALUES('integrity-check')") is None
    # Ids go on from the highest one kept, and a deleted one is never given out again.
    assert store.add_memory(db, "after delete", store.TRUSTED, None, None) > new
    assert store.create_task(db, "later", "", None, store.TRUSTED, None, None)["id"] > tasks[2]
    db.close()


def test_migration_6_on_an_empty_database(tmp_path, monkeypatch):
    path = tmp_path / "palui.db"
    database_up_to(path, 5, monkeypatch).close()
    db = Database(path)
    mid = store.add_memory(db, "hello world", store.TRUSTED, None, None)
    assert [m["id"] for m in store.search_memories(db, "hello", 5)] == [mid]
    db.close()
