"""``palui chat``: commands never reach the model, inline approvals, and the live-service path (SPEC §8)."""

from __future__ import annotations

import sqlite3

from support.scripts import call, calls, text, write_script
from support.live_service import LiveService


def turns(home):
    con = sqlite3.connect(home / "palui.db")
    try:
        return con.execute("SELECT input, status, owner FROM turns ORDER BY created_at").fetchall()
    finally:
        con.close()


def test_chat_commands_and_inline_approval(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("tasks__create_task", title="water plants")),
                         calls(call("tasks__delete_task", id=1)), text("Created and deleted."))
    session = "\n".join(["/help", "/status", "/aprove x", "/approve", "make and remove a task", "y", "/new", "/quit"])
    r = cli("chat", "--model", model, input=session + "\n")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "/approve ID" in out  # /help
    assert "tokens today:" in out  # /status
    assert "unknown command /aprove" in out
    assert "/approve needs exactly one approval id" in out
    assert "tasks__create_task" in out and "-> run" in out
    assert "tasks__delete_task" in out and "ask: destructive tool in a chat turn" in out
    assert "Created and deleted." in out
    assert "new conversation" in out
    # only the one message became a turn: commands and the inline answer never reached the model
    assert [t[0] for t in turns(home)] == ["make and remove a task"]
    assert cli.json("tasks", "list", "--status", "all", "--json") == []


def test_chat_goes_through_live_service(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text="via service")), text("Stored."))
    with LiveService(home) as srv:
        r = cli("chat", "--model", model, input="remember this\n/quit\n")
        assert r.returncode == 0, r.stderr
        assert "Stored." in r.stdout
        [(inp, status, owner)] = turns(home)
        assert status == "done"
        assert owner.endswith(f":{srv.proc.pid}")  # the service process ran the turn
        r = cli("run", "--json", "--model", model, "again")
        assert r.returncode == 0 and '"status": "done"' in r.stdout
        assert turns(home)[-1][2].endswith(f":{srv.proc.pid}")


def test_with_a_live_service_its_model_applies(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", text("From the service's model."))
    with LiveService(home, env={"PALUI_MODEL": model}):
        r = cli("run", "hello")  # no model in the CLI's own configuration
        assert r.returncode == 0, r.stderr
        assert "From the service's model." in r.stdout
        r = cli("status", "--json")
        assert r.returncode == 0 and model in r.stdout
        r = cli("chat", input="hi\n/quit\n")
        assert r.returncode == 0, r.stderr
        assert "From the service's model." in r.stdout
