"""Stored rows that an unbounded setting once made are read without crashing (spec §5.5, §10.4).

Before the settings were bounded, ``[approvals] chat_expiry_seconds = 99999999999999999999999`` stored an approval
expiring at 10^23 s after the epoch: ``approvals list``, ``approvals deny``, ``palui chat`` and the web page then
died with ``OverflowError`` even after the file was fixed. Such a row is made here the way it was then (the
setting is refused now), and every surface reads it bounded: it expires 30 days after it was asked, and shows so.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime

import pytest
from starlette.testclient import TestClient

from palui.server.app import create_app, session_value
from support.scripts import call, calls, text, write_script


@pytest.fixture
def asked(cli, home, tmp_path):
    """A pending approval (a destructive call in a chat turn) whose stored expiry no clock can hold."""
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("done"))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    r = cli.json("run", "forget it", "--json")
    assert r["status"] == "awaiting_approval", r
    aid = r["pending_approvals"][0]["id"]
    con = sqlite3.connect(home / "palui.db")
    with con:
        con.execute("UPDATE approvals SET expires_at = 1e23 WHERE id = ?", (aid,))
    con.close()
    return aid


def days_open(a: dict) -> float:
    return (datetime.fromisoformat(a["expires_at"]) - datetime.fromisoformat(a["created_at"])).total_seconds() / 86400


def test_approvals_list_and_show_read_it_bounded(cli, asked):
    r = cli("approvals", "list")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    # 30 days less the moments since it was asked: "in 30 days" within half a second of it, "in 29 days" after
    assert asked in r.stdout and "expires" in r.stdout, r.stdout
    assert re.search(r"expires [A-Z][a-z]{2} \d\d \d\d:\d\d, in (29|30) days", r.stdout), r.stdout
    [a] = cli.json("approvals", "list", "--json")
    assert a["id"] == asked and days_open(a) == 30
    shown = cli("approvals", "show", asked)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr


def test_it_can_be_denied_and_is_listed_after(cli, asked):
    r = cli("approvals", "deny", asked, "--reason", "no")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    [a] = cli.json("approvals", "list", "--all", "--json")
    assert a["status"] == "denied" and days_open(a) == 30


def test_a_row_answered_before_the_bound_was_written_is_shown_bounded(cli, home, asked):
    cli("approvals", "deny", asked)
    con = sqlite3.connect(home / "palui.db")
    with con:  # an answered row keeps what it stored: only its display is bounded
        con.execute("UPDATE approvals SET expires_at = 1e23 WHERE id = ?", (asked,))
    con.close()
    [a] = cli.json("approvals", "list", "--all", "--json")
    assert days_open(a) == 30


def test_palui_chat_starts_and_lists_it(cli, asked):
    r = cli("chat", input="/quit\n")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert asked in r.stdout and "1 approval(s) pending" in r.stdout, r.stdout


def test_the_web_page_shows_it(home, asked):
    from palui.service import Service

    svc = Service()
    with TestClient(create_app(svc, "tok", port=8765), base_url="http://127.0.0.1:8765",
                    cookies={"palui_session": session_value("tok")}) as c:
        api = c.get("/api/approvals", headers={"Authorization": "Bearer tok"})
        assert api.status_code == 200 and days_open(api.json()[0]) == 30
        for path in ("/approvals", f"/chat/{api.json()[0]['conversation']}"):
            r = c.get(path)
            assert r.status_code == 200 and asked in r.text, path
        assert c.get("/status").status_code == 200
    svc.db.close()
