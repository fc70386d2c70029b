"""Synthetic history and catalogs for ``bench/scale.py``: stored turns cloned from a real one, and many MCP tools.

Cloning keeps the rows realistic (the same columns, sizes and JSON as a real turn writes)
without running 100,000 turns: one template turn is run through ``TurnsPart.send``, its rows
(turn, events, run, usage, audit, inbox, conversation) are read back, and copies with new
random ids and chosen times are inserted in bulk. Every 10th copy also gets an answered
approval and every 5th an untrusted-content row of 2,000 characters, as a turn that
fetched a page would. Column lists come from the rows themselves, so this works on any
schema version (the benchmark runs against an older checkout too).
"""

from __future__ import annotations

import json
import os
import random
import time
from datetime import UTC, datetime
from typing import Any

DAY = 86400.0


def _hex() -> str:
    """128 random bits, as Palui's own ids (palui.store.ids): 40 bits collided while cloning 100,000 turns."""
    return os.urandom(16).hex()


def _day(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d")


def template(db, turn_id: str) -> dict[str, Any]:
    """The rows one finished turn wrote, by table (``{"turns": [row], "runs": [...], …}``)."""
    conv = db.one("SELECT conversation_id FROM turns WHERE id = ?", (turn_id,))[0]
    rows = {
        "turns": db.all("SELECT * FROM turns WHERE id = ?", (turn_id,)),
        "turn_events": db.all("SELECT * FROM turn_events WHERE turn_id = ?", (turn_id,)),
        "runs": db.all("SELECT * FROM runs WHERE turn_id = ?", (turn_id,)),
        "usage": db.all("SELECT * FROM usage WHERE turn_id = ?", (turn_id,)),
        "audit": db.all("SELECT * FROM audit WHERE turn_id = ?", (turn_id,)),
        "inbox": db.all("SELECT * FROM inbox WHERE turn_id = ?", (turn_id,)),
        "conversations": db.all("SELECT * FROM conversations WHERE id = ?", (conv,)),
    }
    return {k: [dict(r) for r in v] for k, v in rows.items()}


def _insert(c, table: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    cols = [k for k in rows[0] if not (k == "id" and table in ("runs", "usage", "audit", "inbox", "untrusted_content"))]
    c.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                  [tuple(r[k] for k in cols) for r in rows])


def clone_turns(db, tpl: dict[str, Any], times: list[float], conversation: str | None = None,
                per_conversation: int = 4) -> None:
    """Insert one copy of the template turn per entry of ``times`` (epoch seconds, its start).

    With ``conversation`` every copy belongs to it (a long conversation); otherwise a new
    conversation is made for every ``per_conversation`` copies. Written :data:`CHUNK` copies per
    transaction, so a million copies never sit in memory at once.
    """
    ordered = sorted(times)
    conv = conversation
    for start in range(0, len(ordered), CHUNK):
        conv = _clone_chunk(db, tpl, ordered[start:start + CHUNK], start, conversation, conv, per_conversation)


CHUNK = 10_000


def _clone_chunk(db, tpl: dict[str, Any], times: list[float], first: int, conversation: str | None,
                 conv: str | None, per_conversation: int) -> str | None:
    """Copies ``first``, ``first + 1``… of :func:`clone_turns` at ``times`` (sorted), in one transaction.
    Returns the conversation the last copy went to (the next chunk goes on filling it)."""
    # Parents first (foreign keys): conversations, then turns, then what refers to turns.
    order = ("conversations", "turns", *(k for k in tpl if k not in ("conversations", "turns")), "approvals",
             "untrusted_content")
    out: dict[str, list[dict[str, Any]]] = {k: [] for k in order}
    for i, t in enumerate(times, start=first):
        tid = f"t-{_hex()}"
        if conversation is None and i % per_conversation == 0:
            conv = f"c-{_hex()}"
            for r in tpl["conversations"]:
                row = {**r, "id": conv, "created_at": t}
                if "last_at" in row:
                    row["last_at"] = t
                out["conversations"].append(row)
        for r in tpl["turns"]:
            out["turns"].append({**r, "id": tid, "conversation_id": conv, "created_at": t, "updated_at": t + 0.01})
        for r in tpl["turn_events"]:
            out["turn_events"].append({**r, "turn_id": tid})
        for r in tpl["runs"]:
            out["runs"].append({**r, "turn_id": tid, "time": t})
        for r in tpl["usage"]:
            out["usage"].append({**r, "turn_id": tid, "time": t, "day": _day(t)})
        for r in tpl["audit"]:
            out["audit"].append({**r, "turn_id": tid, "time": t})
        for r in tpl["inbox"]:
            out["inbox"].append({**r, "turn_id": tid, "conversation_id": conv, "time": t})
        if i % 10 == 0:
            out["approvals"].append({
                "id": f"a-{_hex()}", "turn_id": tid, "tool_call_id": "s1c1", "tool": "recall__forget_memory",
                "class": "destructive", "class_source": "builtin", "origin": "chat", "reason": "ask: destructive",
                "args_json": '{"id":1}', "args_hash": "0" * 64, "untrusted_args": "[]", "status": "approved",
                "created_at": t, "expires_at": t + 1800, "answered_at": t + 5, "used": 1})
        if i % 5 == 0:
            out["untrusted_content"].append({"id": None, "conversation_id": conv, "turn_id": tid,
                                             "source": "web__fetch_page at step 1",
                                             "text": ("lorem ipsum dolor sit amet " * 80)[:2000], "created_at": t})
    with db.write() as c:  # where the schema keeps cap counters, its triggers count these rows too
        for table, rows in out.items():
            _insert(c, table, rows)
    return conv


def history_times(n: int, spread: str, now: float | None = None, seed: int = 1) -> list[float]:
    """``n`` start times: ``today`` (within the last 20 hours) or ``year`` (the last 365 days)."""
    now = time.time() if now is None else now
    rnd = random.Random(seed)
    span = 20 * 3600.0 if spread == "today" else 365 * DAY
    return [now - 120 - rnd.random() * span for _ in range(n)]


WORDS = ("calendar event meeting invite note page issue pull request repository file folder channel email "
         "contact weather forecast invoice payment customer ticket deploy build log metric alert dashboard "
         "query table row document sheet slide photo album song playlist map route").split()


def mcp_specs(n: int, seed: int) -> list[Any]:
    """``n`` read-only MCP tool specs with word-salad descriptions (no word of the bench question)."""
    from palui.connectors.base import ToolSpec

    rnd = random.Random(seed)
    out = []
    for i in range(n):
        words = rnd.sample(WORDS, 2)
        out.append(ToolSpec(name=f"{'_'.join(words)}_{i}",
                            description=" ".join(rnd.choices(WORDS, k=rnd.randint(8, 30))),
                            input_schema={"type": "object", "properties": {w: {"type": "string"} for w in words}},
                            annotations={"readOnlyHint": True}))
    return out


def add_catalog(svc, n_mcp: int, per_connector: int = 25, seed: int = 3) -> list[str]:
    """Register ``n_mcp`` enabled MCP tools over connectors of about ``per_connector`` tools each.

    Returns the connector ids. Nothing is started: the connectors exist only as stored rows.
    """
    ids = []
    left, k = n_mcp, 0
    while left > 0:
        size = min(left, per_connector)
        cid = f"mcp-bench-{k:03d}"
        svc.tools.register(cid, mcp_specs(size, seed + k), name=cid, kind="mcp")
        ids.append(cid)
        left -= size
        k += 1
    with svc.db.write() as c:
        c.execute("UPDATE tools SET enabled = 1 WHERE connector_id LIKE 'mcp-bench-%'")
        c.execute("UPDATE connectors SET config_json = ? WHERE id LIKE 'mcp-bench-%'",
                  (json.dumps({"command": "/bin/false"}),))
    return ids
