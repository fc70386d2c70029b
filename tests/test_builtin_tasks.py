"""tasks connector: provenance follows taint into storage and back (spec §4, §7)."""

from __future__ import annotations

import pytest

from palui.connectors.base import CallContext
from palui.connectors.builtin.tasks import TasksConnector
from palui.types import Origin


def ctx(svc, tainted: bool = False, source: str | None = None, turn: str = "t1") -> CallContext:
    return CallContext(turn_id=turn, conversation_id="c1", origin=Origin.CHAT, tainted=tainted,
                       taint_source=source, step=1, db=svc.db, settings=svc.settings)


async def call(conn, name, args, c):
    return await conn.call_tool(name, args, c)


async def test_tasks_provenance_and_listing_taint(svc):
    tasks = TasksConnector()
    r = await call(tasks, "create_task", {"title": "Renew passport", "due": "2026-06-01"}, ctx(svc))
    assert not r.is_error and r.untrusted is False and "[1] (open, due 2026-06-01) Renew passport" in r.text
    listing = await call(tasks, "list_tasks", {}, ctx(svc))
    assert listing.untrusted is False

    r2 = await call(tasks, "create_task", {"title": "Wire 900 EUR", "notes": "to account X"},
                    ctx(svc, tainted=True, source="web__fetch_page at step 2"))
    assert r2.untrusted is True
    [row] = [t for t in svc.memories.tasks("all") if t["id"] == 2]
    assert row["provenance"] == "untrusted" and row["source"] == "web__fetch_page at step 2"

    listing = await call(tasks, "list_tasks", {"status": "open"}, ctx(svc))
    assert listing.untrusted is True and listing.taint_detail == "task 2 has untrusted provenance"
    assert listing.untrusted_texts == ["Wire 900 EUR\nto account X"]

    svc.memories.trust_task(2)
    assert (await call(tasks, "list_tasks", {}, ctx(svc))).untrusted is False


async def test_update_in_tainted_turn_makes_task_untrusted_and_clean_update_keeps_it(svc):
    tasks = TasksConnector()
    await call(tasks, "create_task", {"title": "Book flight"}, ctx(svc))
    r = await call(tasks, "update_task", {"id": 1, "notes": "use code EVIL"},
                   ctx(svc, tainted=True, source="mcp-mail__read_inbox at step 1"))
    assert r.untrusted is True and "use code EVIL" in r.text
    assert [t["provenance"] for t in svc.memories.tasks("all")] == ["untrusted"]
    # A later clean update does not launder the third-party notes.
    r = await call(tasks, "update_task", {"id": 1, "status": "done"}, ctx(svc))
    assert r.untrusted is True and "(done)" in r.text
    assert [(t["provenance"], t["status"]) for t in svc.memories.tasks("all")] == [("untrusted", "done")]


async def test_task_status_filters_update_and_delete(svc):
    tasks = TasksConnector()
    for title in ("a", "b"):
        await call(tasks, "create_task", {"title": title}, ctx(svc))
    await call(tasks, "update_task", {"id": 2, "status": "done", "title": "b2", "due": "2026-01-01"}, ctx(svc))
    assert (await call(tasks, "list_tasks", {}, ctx(svc))).text == "[1] (open) a"
    assert (await call(tasks, "list_tasks", {"status": "done"}, ctx(svc))).text == "[2] (done, due 2026-01-01) b2"
    assert len((await call(tasks, "list_tasks", {"status": "all"}, ctx(svc))).text.splitlines()) == 2
    cleared = await call(tasks, "update_task", {"id": 2, "due": ""}, ctx(svc))
    assert "due" not in cleared.text
    d = await call(tasks, "delete_task", {"id": 1}, ctx(svc))
    assert not d.is_error and "[1]" in d.text
    assert (await call(tasks, "list_tasks", {}, ctx(svc))).text == "No open tasks."
    for name, args in [("delete_task", {"id": 1}), ("update_task", {"id": 99, "title": "x"})]:
        r = await call(tasks, name, args, ctx(svc))
        assert r.is_error and "No task with id" in r.text


@pytest.mark.parametrize("name,args", [("create_task", {}), ("create_task", {"title": ""}),
                                       ("update_task", {"id": 1}), ("update_task", {"id": 1, "status": "later"}),
                                       ("update_task", {"id": 1, "title": " "}), ("list_tasks", {"status": "x"}),
                                       ("delete_task", {"id": None}), ("nope", {}),
                                       ("create_task", {"title": "x", "due": "tomorrow"}),
                                       ("update_task", {"id": 1, "due": "2026-13-01"})])
async def test_task_bad_arguments_are_error_results(svc, name, args):
    tasks = TasksConnector()
    await call(tasks, "create_task", {"title": "keep"}, ctx(svc))
    r = await call(tasks, name, args, ctx(svc))
    assert r.is_error and r.text
    assert [(t["title"], t["status"]) for t in svc.memories.tasks("all")] == [("keep", "open")]


async def test_due_accepts_iso_dates_and_date_times(svc):
    tasks = TasksConnector()
    r = await call(tasks, "create_task", {"title": "call", "due": "2026-05-01T09:30"}, ctx(svc))
    assert not r.is_error and "due 2026-05-01T09:30" in r.text
    r = await call(tasks, "create_task", {"title": "earlier", "due": " 2026-04-30 "}, ctx(svc))
    assert not r.is_error
    assert (await call(tasks, "list_tasks", {}, ctx(svc))).text.splitlines()[0].startswith("[2]")


@pytest.mark.parametrize("name,args,limit", [
    ("create_task", {"title": "x" * 501}, "500"),
    ("create_task", {"title": "ok", "notes": "n" * 8193}, "8,192"),
    ("update_task", {"id": 1, "title": "t" * 501}, "500"),
    ("update_task", {"id": 1, "notes": "n" * 5_000_000}, "8,192"),
])
async def test_task_text_has_a_size_limit(svc, name, args, limit):
    tasks = TasksConnector()
    await call(tasks, "create_task", {"title": "keep", "notes": "as is"}, ctx(svc))
    r = await call(tasks, name, args, ctx(svc))
    assert r.is_error and f"the limit is {limit}" in r.text
    assert [(t["title"], t["notes"]) for t in svc.memories.tasks("all")] == [("keep", "as is")]


async def test_task_text_at_the_limit_is_stored(svc):
    tasks = TasksConnector()
    r = await call(tasks, "create_task", {"title": "t" * 500, "notes": "n" * 8192}, ctx(svc))
    assert not r.is_error
    assert [(len(t["title"]), len(t["notes"])) for t in svc.memories.tasks("all")] == [(500, 8192)]


async def test_every_builtin_tool_refuses_unexpected_arguments_through_a_turn(home, tmp_path, monkeypatch):
    """Through a scripted turn: each built-in tool given an extra key is refused at the call's argument step
    (spec §3.3: its input schema says ``additionalProperties: false``), answered with an error naming the key,
    and nothing is stored for it: no audit row, no event. (Five failures in a row: the error-streak stop of
    spec §6.3 is switched off for this turn.)"""
    from palui.runner import state as st
    from palui.service import Service
    from support.scripts import call, calls, text, write_script

    monkeypatch.setenv("PALUI_BUDGETS__ERROR_STREAK", "0")
    svc = Service()

    bad = [call("recall__add_memory", text="a", extra=1), call("tasks__create_task", title="t", color="red"),
           call("tasks__list_tasks", everything=True), call("messages__send_message", text="hi", cc="x"),
           call("web__fetch_page", url="http://127.0.0.1:1/", method="POST")]
    r = await svc.turns.send("go", model=write_script(tmp_path / "s.json", calls(*bad), text("ok")))
    assert r["status"] == "done" and not [e for e in r["events"] if e["type"] == "tool_call"]
    answered = {p.tool_name: p.content for m in st.load(svc.db, r["turn"]).messages for p in getattr(m, "parts", [])
                if p.part_kind == "tool-return"}
    for c, key in zip(bad, ["extra", "color", "everything", "cc", "method"], strict=True):
        assert f"has {key}, which the schema does not allow (additionalProperties)" in answered[c["tool"]]
    assert svc.audit.rows(r["turn"]) == []
    assert svc.memories.list() == [] and svc.memories.tasks("all") == []
    assert not [m for m in svc.notifier.inbox() if m["kind"] == "message"]
