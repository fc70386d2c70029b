"""Every SQL statement on a turn's hot path uses an index on the tables that grow with history
(docs/decisions/0073-an-index-for-every-hot-path-query.md).

The statements run by starting and claiming a turn, its model steps, a tool call, an approval and
its answer, ``resume_ready`` and the service's tick are recorded with SQLite's trace callback, then
each is explained (``EXPLAIN QUERY PLAN``) on the same database: a ``SCAN`` of a table that grows
with use (turns, runs, usage, audit, approvals, untrusted content, inbox, …) fails the test, as
does one in the body of a trigger those statements fire. Tables that grow with the catalog, not
with history (tools, connectors) may be read whole: the catalog is cached per version.
"""

from __future__ import annotations

import re
import sqlite3
import time

from palui.types import TurnStatus
from support.scripts import call, calls, text, write_script

GROWING = {"turns", "runs", "usage", "usage_days", "run_minutes", "audit", "approvals", "untrusted_content",
           "inbox", "conversations", "turn_events", "webhook_deliveries", "memories", "tasks"}
_SCAN = re.compile(r"\bSCAN (\w+)")
_FROM = re.compile(r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)(?:\s+(?:AS\s+)?(\w+))?", re.IGNORECASE)
_NOT_ALIAS = {"where", "join", "on", "left", "inner", "cross", "order", "group", "limit", "set", "values", "using",
              "natural", "outer", "union", "having", "window", "as", "select", "default"}


def aliases(sql: str) -> dict[str, str]:
    """Table names by the name a query plan shows for them: the table itself or its alias."""
    out = {}
    for table, alias in _FROM.findall(sql):
        out[table.lower()] = table.lower()
        if alias and alias.lower() not in _NOT_ALIAS:
            out[alias.lower()] = table.lower()
    return out


_INDEX_WALK = re.compile(r"^SCAN \w+ USING (COVERING )?INDEX \w+$")
_LIMITED = re.compile(r"\bLIMIT\s+\d+\s*$", re.IGNORECASE)


def scans(conn: sqlite3.Connection, sql: str) -> list[str]:
    """The growing tables ``sql`` reads whole, from its query plan (``[]`` when every one is searched).

    A plan names a table by its alias when the query gives one. One ``SCAN`` is bounded and allowed:
    walking an index in the order the query asks for, stopped by a final ``LIMIT n`` (no OFFSET, no
    sort of its own): it reads ``n`` rows, as the conversation list does.
    """
    names = aliases(sql)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    bounded = bool(_LIMITED.search(sql)) and not any("TEMP B-TREE" in d for d in plan) and len(
        [d for d in plan if d.startswith("SCAN ")]) == 1
    found = [names.get(m.group(1).lower(), m.group(1).lower()) for d in plan for m in [_SCAN.search(d)]
             if m and not (bounded and _INDEX_WALK.match(d))]
    return [t for t in found if t in GROWING]


def trigger_statements(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """The statements in each trigger's body, with ``new.x`` / ``old.x`` replaced by a literal (to be explained)."""
    out = {}
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'"):
        body = sql[sql.upper().index("BEGIN") + 5: sql.upper().rindex("END")]
        body = re.sub(r"\b(new|old)\.\w+", "'x'", body, flags=re.IGNORECASE)
        out[name] = [s.strip() for s in body.split(";") if s.strip()]
    return out


def recorded(statements: list[str]) -> list[str]:
    seen, out = set(), []
    for s in statements:
        s = s.strip()
        if not re.match(r"(SELECT|INSERT|UPDATE|DELETE|WITH|REPLACE)\b", s, re.IGNORECASE) or s in seen:
            continue
        seen.add(s)
        out.append(s)
    return out


def test_the_checker_sees_a_scan(svc):
    conn = svc.db._connect()
    assert scans(conn, "SELECT * FROM turns WHERE input = 'x'") == ["turns"]
    assert scans(conn, "SELECT COUNT(*) FROM usage") == ["usage"]
    assert scans(conn, "SELECT c.id FROM conversations c ORDER BY c.created_at LIMIT 5") == ["conversations"]
    assert scans(conn, "SELECT c.id FROM conversations c ORDER BY c.last_at DESC LIMIT 5") == []  # an index walk
    assert scans(conn, "SELECT c.id FROM conversations c ORDER BY c.last_at DESC") == ["conversations"]
    assert scans(conn, "SELECT t.id FROM turns AS t JOIN runs r ON r.turn_id = t.id WHERE t.input = 'x'") == ["turns"]
    assert scans(conn, "SELECT * FROM turns WHERE id = 'x'") == []
    assert scans(conn, "SELECT * FROM tools") == []  # grows with the catalog, not with history


async def test_hot_path_statements_never_scan_a_growing_table(svc, tmp_path, home):
    # Some history first, so the tables are not empty.
    model = write_script(tmp_path / "s.json", calls(call("recall__search_memories", query="milk")), text("ok"))
    for _ in range(3):
        assert (await svc.turns.send("hello", model=model))["status"] == "done"
    ask = write_script(tmp_path / "ask.json", calls(call("recall__forget_memory", id=1)), text("gone"))
    conv = svc.turns.new_conversation()

    statements: list[str] = []
    conn = svc.db._connect()  # this thread's connection: the turn runs on it
    conn.set_trace_callback(statements.append)
    try:
        # Starting and claiming a turn, two model steps, one call, the end.
        r = await svc.turns.send("do I need milk?", model=model)
        assert r["status"] == "done"
        # An ask: the approval, the pause, the answer, resume_ready.
        r = await svc.turns.send("forget it", model=ask, conversation=conv)
        assert r["status"] == "awaiting_approval"
        [a] = r["pending_approvals"]
        svc.approvals.answer(a["id"], True, via="cli")
        [resumed] = await svc.turns.resume_ready()
        assert resumed["status"] == "done"
        # A queued turn, then the service's tick (sweep, re-decide, orphans, answered turns, queued turns, jobs).
        svc.jobs.add("daily", "* * * * *", "check")
        with svc.db.write() as c:
            c.execute("UPDATE jobs SET next_run = ?", (time.time() - 1,))  # due now
        tid = svc.turns.start("later", model=model)
        svc.runtime.install_tickers()
        await svc.runtime.tick(time.time())
        if tid in svc.runtime.tasks:
            await svc.runtime.tasks[tid]
        for task in list(svc.runtime.tasks.values()):
            await task
        assert svc.turns.result(tid)["status"] == "done"
        svc.status.get()
        svc.conversations.list()
    finally:
        conn.set_trace_callback(None)

    sqls = recorded(statements)
    text_all = "\n".join(sqls)
    # The recording holds the hot path (else this test could not fail).
    for needle in ("INSERT INTO turns", "FROM usage_days", "run_minutes", "INSERT INTO audit", "INSERT INTO approvals",
                   "DELETE FROM inbox",
                   "FROM approvals", "status = 'queued'", "INSERT INTO runs", "FROM conversations"):
        assert needle in text_all, f"not recorded: {needle}"
    bad = {s: t for s in sqls if (t := scans(conn, s))}
    assert not bad, "statements that scan a table growing with history:\n" + "\n".join(
        f"  {t}: {s[:300]}" for s, t in bad.items())
    fired = {name for name in trigger_statements(conn) if name.split("_")[0] in {"usage", "run", "conversations",
                                                                                 "catalog"}}
    bad_triggers = {f"{name}: {s}": t for name, body in trigger_statements(conn).items() if name in fired
                    for s in body if (t := scans(conn, s))}
    assert not bad_triggers, bad_triggers


def test_claiming_searches_only(svc, tmp_path):
    """Claiming alone (the admitting transaction: caps, one turn per conversation, the pause)."""
    model = write_script(tmp_path / "s.json", text("ok"))
    tid = svc.turns.start("x", model=model)
    statements: list[str] = []
    conn = svc.db._connect()
    conn.set_trace_callback(statements.append)
    try:
        assert svc.turns.claim(tid, (TurnStatus.QUEUED,)).claimed
    finally:
        conn.set_trace_callback(None)
    sqls = recorded(statements)
    assert any("FROM run_minutes" in s for s in sqls) and any("INSERT INTO runs" in s for s in sqls)
    bad = {s: t for s in sqls if (t := scans(conn, s))}
    assert not bad, bad
