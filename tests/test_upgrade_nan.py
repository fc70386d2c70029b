"""A home an earlier Palui wrote with ``NaN`` and ``Infinity`` from a model opens clean (spec §10.1, §10.3).

``tests/fixtures/home-nan/home`` was written by commit 240a2e5 (schema migration 37, before every JSON writer was
strict) with ``tests/support/make_nan_home.py`` (its docstring says how): a turn whose read
``tasks__list_tasks {"status": NaN}`` ran and whose unknown tool ``{"a": Infinity}`` was refused, and a turn
paused on an approval of ``recall__forget_memory {"id": NaN}``. With that Palui, ``palui audit verify`` died
(``sqlite3.OperationalError: malformed JSON``: SQLite's JSON functions refuse those numbers), ``GET
/api/approvals?all=1`` answered 500 and ``palui approvals list --json`` printed ``NaN``, which is not JSON.

Today's code migrates the unchained rows (``turn_events``, a held call's ``pending_json``: their numbers become
the strings ``"NaN"``, ``"Infinity"``) and never rewrites a hashed one (the audit, an approval's arguments and
hash): their readers show such numbers as strings.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from starlette.testclient import TestClient

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "home-nan"
MADE = json.loads((FIXTURE / "fixture.json").read_text(encoding="utf-8"))


def test_a_home_holding_nan_from_a_model_verifies_lists_and_serves(home, cli):
    shutil.copytree(FIXTURE / "home", home, dirs_exist_ok=True)
    stored_before = sqlite3.connect(home / "palui.db").execute("SELECT args_json, args_hash FROM approvals").fetchall()

    r = cli("audit", "verify")  # the first command migrates the home
    assert r.returncode == 0 and r.stdout.startswith("audit chain intact: 3 row(s)"), r.stdout + r.stderr
    listed = json.loads(cli("approvals", "list", "--all", "--json").stdout)
    assert [(a["id"], a["tool"], a["args"]) for a in listed] == [(MADE["approval"], "recall__forget_memory",
                                                                 {"id": "NaN"})]
    assert "NaN" in cli("approvals", "list", "--all").stdout

    from palui.server.app import create_app
    from palui.service import Service

    svc = Service()
    try:
        with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765",
                        headers={"Authorization": "Bearer tok"}) as client:
            r = client.get("/api/approvals", params={"all": 1})
            assert r.status_code == 200 and r.json()[0]["args"] == {"id": "NaN"}
            for turn in (MADE["read_turn"], MADE["paused_turn"]):
                r = client.get(f"/api/turns/{turn}")
                assert r.status_code == 200, r.text
            called = [e for e in client.get(f"/api/turns/{MADE['read_turn']}").json()["events"]
                      if e["type"] == "tool_call"]
            assert [e["args"] for e in called] == [{"status": "NaN"}, {"a": "Infinity"}]
    finally:
        svc.db.close()

    con = sqlite3.connect(home / "palui.db")
    try:
        assert con.execute("SELECT COUNT(*) FROM turn_events WHERE NOT json_valid(event)").fetchone()[0] == 0
        assert con.execute("SELECT COUNT(*) FROM turns WHERE pending_json IS NOT NULL AND NOT json_valid(pending_json)"
                           ).fetchone()[0] == 0
        # the approval's row is hashed (its args_hash binds the call): never rewritten
        assert con.execute("SELECT args_json, args_hash FROM approvals").fetchall() == stored_before
    finally:
        con.close()
