"""The per-process tool catalog and its version (docs/decisions/0076-a-per-process-tool-catalog.md): every tool
write bumps the version in its own transaction, a snapshot is reused only while the version holds, and the call-time
check reads the version with the row, so a switch-off made by another process is seen before the call, not at the
next turn."""

from __future__ import annotations

import asyncio

from palui.config import load_settings
from palui.service import Service
from palui.store import catalog
from support.scripts import call, calls, text, write_script


def test_every_tool_write_bumps_the_version_and_only_those(svc):
    v = catalog.version(svc.db)
    steps = [
        ("UPDATE tools SET enabled = 0 WHERE name = 'recall__add_memory'", True),
        ("UPDATE connectors SET trusted_source = 1 WHERE id = 'tasks'", True),
        ("UPDATE connectors SET enabled = 0 WHERE id = 'web'", True),
        ("UPDATE connectors SET private = 1 WHERE id = 'tasks'", True),  # the Rule of Two reads it (migration 29)
        ("UPDATE tools SET reaches_outside = 1 WHERE name = 'recall__search_memories'", True),
        ("DELETE FROM tools WHERE name = 'web__fetch_page'", True),
        ("UPDATE connectors SET state = 'connected' WHERE id = 'recall'", False),  # every connection writes it
        ("INSERT INTO inbox (time, kind, text) VALUES (0, 'notice', 'x')", False),
    ]
    for sql, bumps in steps:
        with svc.db.write() as c:
            c.execute(sql)
        now = catalog.version(svc.db)
        assert (now > v) == bumps, sql
        v = now


def test_a_snapshot_is_reused_while_the_version_holds(svc):
    first = catalog.snapshot(svc.db)
    assert catalog.snapshot(svc.db) is first
    other = Service(load_settings({"PALUI_HOME": str(svc.settings.home)}))  # another process's connection
    other.tools.set_enabled(["recall__add_memory"], False)
    second = catalog.snapshot(svc.db)
    assert second is not first and not second.tools["recall__add_memory"].enabled
    assert first.tools["recall__add_memory"].enabled  # an old snapshot is never changed, only replaced
    other.db.close()


def test_tool_now_sees_another_process_at_once(svc):
    catalog.snapshot(svc.db)  # cached here
    other = Service(load_settings({"PALUI_HOME": str(svc.settings.home)}))
    other.tools.set_enabled(["recall__search_memories"], False)
    assert not catalog.tool_now(svc.db, "recall__search_memories").enabled
    assert not catalog.tool_now(svc.db, connector="recall", raw_name="search_memories").enabled
    assert catalog.tool_now(svc.db, "nope__nothing") is None
    catalog.snapshot(svc.db)  # cached again, at the version after the switch-off
    other.tools.set_private("tasks")  # a private mark (spec §4.5) is seen before the next call too
    assert catalog.tool_now(svc.db, "tasks__list_tasks").connector_private
    other.db.close()


async def test_a_switch_off_in_another_process_refuses_the_next_call_of_a_running_turn(svc, tmp_path):
    model = write_script(tmp_path / "s.json",
                         {"delay_seconds": 1.0, **calls(call("recall__search_memories", query="milk"))}, text("ok"))
    other = Service(load_settings({"PALUI_HOME": str(svc.settings.home)}))

    async def switch_off_meanwhile() -> None:
        await asyncio.sleep(0.3)  # the turn has offered its tools and waits for the model
        other.tools.set_enabled(["recall__search_memories"], False)

    task = asyncio.create_task(switch_off_meanwhile())
    r = await svc.turns.send("do I need milk?", model=model)
    await task
    step = next(e for e in r["events"] if e["type"] == "step")
    assert "recall__search_memories" in step["tools_offered"]  # offered at the start
    [c] = [e for e in r["events"] if e["type"] == "tool_call"]
    assert c["verdict"] == "off" and c["is_error"]  # refused at call time, in this turn
    assert [a["outcome"] for a in svc.audit.rows() if a["tool"] == "recall__search_memories"] == ["refused"]
    other.db.close()
