"""What a person reads and what an idle service's tick does cost the same after a year of history
(docs/decisions/0154-reads-bounded.md, spec §5.2).

The statements of the web pages (``/chat``, ``/approvals`` with the nav's count), ``status()``, the approvals
and questions listed, and two ticks of an idle service are recorded with SQLite's trace callback on every
connection the service opens (the pages run in the test client's thread). Each is then checked twice:

- its query plan scans no table that grows with history (``tests/test_sql_plans.py``'s rule), and it never
  lists turns by a finished status (the old question sweep searched ``turns_status`` for every finished turn
  ever: a search in the plan, linear all the same);
- run again (in a transaction rolled back) after 4,000 more finished turns with their approvals, questions,
  audit rows and events, it executes about as many SQLite VM instructions as before (counted with the
  progress handler): reads that follow history would execute thousands more.
"""

from __future__ import annotations

import re
import sqlite3
import time

from starlette.testclient import TestClient

from palui.server.app import create_app
from palui.server.session import session_value
from support.scripts import call, calls, text, write_script
from test_sql_plans import recorded, scans

_BY_FINISHED_STATUS = re.compile(r"status\s+IN\s*\(\s*'(done|stopped|error|budget)'", re.IGNORECASE)


def fill(db, n: int, start: int, now: float) -> None:
    """``n`` finished turns (from index ``start``), each in a conversation of 4, a month to a year old, with an
    answered approval, an answered question, two audit rows and three events."""
    conv, turns, appr, elic, audit, events = [], [], [], [], [], []
    for i in range(start, start + n):
        t = now - 30 * 86400 - (i % 330) * 86400 - i
        cid, tid = f"c-f{i // 4:08x}", f"t-f{i:08x}"
        if i % 4 == 0:
            conv.append((cid, "chat", t, t))
        turns.append((tid, cid, "chat", "done", f"question {i}", "[]", t, t + 1))
        appr.append((f"a-f{i:08x}", tid, "s1c1", "recall__forget_memory", "destructive", "builtin", "chat", "ask",
                     "{}", "0" * 64, "[]", "approved", t, t + 1800, t + 5))
        elic.append((f"e-f{i:08x}", tid, "s1c1", "mcp-x__book", "mcp-x", "input_required", "k", "form", "Which?",
                     "chat", "accepted", t, t + 1800, t + 5))
        audit += [(t, tid, "recall__forget_memory", verdict, verdict, outcome, "0" * 64, "0" * 64)
                  for verdict, outcome in (("ask", "asked"), ("run", "ok"))]  # not a chain: only read here
        events += [(tid, k, '{"type": "step"}') for k in range(3)]
    with db.write() as c:
        c.executemany("INSERT INTO conversations (id, origin, created_at, last_at) VALUES (?,?,?,?)", conv)
        c.executemany("INSERT INTO turns (id, conversation_id, origin, status, input, messages_json, created_at,"
                      " updated_at) VALUES (?,?,?,?,?,?,?,?)", turns)
        c.executemany("INSERT INTO approvals (id, turn_id, tool_call_id, tool, class, class_source, origin, reason,"
                      " args_json, args_hash, untrusted_args, status, created_at, expires_at, answered_at)"
                      " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", appr)
        c.executemany("INSERT INTO elicitations (id, turn_id, tool_call_id, tool, connector_id, era, request_key,"
                      " mode, message, origin, status, created_at, expires_at, answered_at)"
                      " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", elic)
        c.executemany("INSERT INTO audit (time, turn_id, tool, verdict, reason, outcome, prev_hash, hash)"
                      " VALUES (?,?,?,?,?,?,?,?)", audit)
        c.executemany("INSERT INTO turn_events (turn_id, seq, event) VALUES (?,?,?)", events)


_NEWEST = re.compile(r"\(SELECT \* FROM (\w+) ORDER BY id DESC LIMIT \d+\)", re.IGNORECASE)


def newest_rows(conn: sqlite3.Connection, sql: str) -> bool:
    """``sql`` reads the newest rows of a table by its integer key, as a page of the inbox does: the plan's one
    scan of that table walks its b-tree from the end, stopped by the ``LIMIT`` (no sort of its own)."""
    m = _NEWEST.search(sql)
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    return bool(m) and not any("TEMP B-TREE" in d and m.group(1) in d for d in plan)


def steps(conn: sqlite3.Connection, sql: str) -> int:
    """SQLite VM instructions (in tens) that running ``sql`` takes, inside a transaction rolled back."""
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn.execute("BEGIN")
    conn.set_progress_handler(tick, 10)
    try:
        conn.execute(sql).fetchall()
    finally:
        conn.set_progress_handler(None, 0)
        conn.execute("ROLLBACK")
    return count[0]


async def test_pages_status_listings_and_the_idle_tick_do_not_follow_history(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("recall__search_memories", query="milk")), text("ok"))
    assert (await svc.turns.send("hello", model=model))["status"] == "done"
    ask = write_script(tmp_path / "ask.json", calls(call("recall__forget_memory", id=1)), text("gone"))
    waiting = await svc.turns.send("forget it", model=ask)
    assert waiting["status"] == "awaiting_approval"
    now = time.time()
    fill(svc.db, 600, 0, now)  # past every page's LIMIT already, so a bounded read reads as much before as after

    statements: list[str] = []
    connect = svc.db._connect

    def traced() -> sqlite3.Connection:
        conn = connect()
        conn.set_trace_callback(statements.append)
        return conn

    svc.db._connect = traced  # type: ignore[method-assign]  # every thread's connection, the pages' too
    app = create_app(svc, "tok", port=8765)  # no lifespan: the tick below is the only one
    client = TestClient(app, base_url="http://127.0.0.1:8765", cookies={"palui_session": session_value("tok")})
    try:
        for path in ("/chat", "/approvals", "/status"):
            assert client.get(path).status_code == 200
        assert svc.approvals.waiting() == 1
        assert [a["id"] for a in svc.approvals.list("pending")] == [waiting["pending_approvals"][0]["id"]]
        assert len(svc.approvals.list(None, limit=50)) == 50
        svc.elicitations.list("pending")
        svc.elicitations.list(None)
        svc.status.get()
        svc.runtime.install_tickers()
        await svc.runtime.tick(time.time())
        await svc.runtime.tick(time.time())  # idle: nothing new since the first
    finally:
        svc.db._connect = connect  # type: ignore[method-assign]
        for conn in {connect()}:
            conn.set_trace_callback(None)
    sqls = recorded(statements)
    joined = "\n".join(sqls)
    for needle in ("FROM approvals", "FROM elicitations", "FROM conversations", "FROM catalog"):
        assert needle in joined, f"not recorded: {needle}"

    conn = sqlite3.connect(svc.settings.db_path, isolation_level=None)
    bad = {s: t for s in sqls if (t := scans(conn, s)) and not newest_rows(conn, s)}
    assert not bad, "statements that scan a table growing with history:\n" + "\n".join(
        f"  {t}: {s[:300]}" for s, t in bad.items())
    listing = [s for s in sqls if "turns" in s and _BY_FINISHED_STATUS.search(s)]
    assert not listing, "statements that list turns by a finished status:\n" + "\n".join(listing)

    before = {s: steps(conn, s) for s in sqls}
    fill(svc.db, 4000, 600, now)
    after = {s: steps(conn, s) for s in sqls}
    grew = {s: (before[s], after[s]) for s in sqls if after[s] > 1.5 * before[s] + 300}
    assert not grew, "statements whose work follows history (VM steps /10 before -> after 4,000 more turns):\n" + \
        "\n".join(f"  {b} -> {a}: {s[:300]}" for s, (b, a) in grew.items())
    conn.close()
