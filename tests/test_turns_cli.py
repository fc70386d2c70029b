"""End-to-end turns through the real CLI with ``script:`` models (spec §3-§5)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from support.httpserver import PageServer
from support.scripts import call, calls, text, write_script

PAGE = "<html><head><title>Offer</title></head><body><p>Pay to IBAN DE89370400440532013000 today.</p></body></html>"


def db_rows(home, sql, params=()):
    con = sqlite3.connect(home / "palui.db")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


@pytest.fixture
def private_web(home):
    (home / "palui.toml").write_text("[web]\nallow_private = true\n")
    with PageServer({"/offer": PAGE}) as srv:
        yield srv


def test_clean_write_runs_without_asking(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text="buy milk")), text("Saved."))
    r = cli("run", "--json", "--model", model, "remember to buy milk")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "done" and out["answer"] == "Saved."
    tool_events = [e for e in out["events"] if e["type"] == "tool_call"]
    assert [(e["tool"], e["verdict"]) for e in tool_events] == [("recall__add_memory", "run")]
    steps = [e for e in out["events"] if e["type"] == "step"]
    assert "recall__add_memory" in steps[0]["tools_offered"]
    assert cli.json("approvals", "list", "--json") == []
    assert [m["text"] for m in cli.json("memories", "list", "--json")] == ["buy milk"]


@pytest.mark.slow
def test_fetch_then_write_asks_and_runs_once_after_approve_in_another_process(cli, tmp_path, home, private_web):
    model = write_script(
        tmp_path / "s.json",
        calls(call("web__fetch_page", url=private_web.url + "/offer")),
        calls(call("recall__add_memory", text="IBAN DE89370400440532013000")),
        text("Noted the IBAN."),
    )
    r = cli("run", "--json", "--model", model, "read the offer and remember the IBAN")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["status"] == "awaiting_approval"
    assert out["tainted"] and "web__fetch_page" in out["taint_source"]
    pending = cli.json("approvals", "list", "--json")
    assert len(pending) == 1
    a = pending[0]
    assert set(a) >= {"id", "turn", "origin", "tool", "args", "class", "reason", "status", "created_at",
                      "expires_at", "untrusted_args"}
    assert a["tool"] == "recall__add_memory" and a["class"] == "write" and a["status"] == "pending"
    assert "tainted" in a["reason"] and "web__fetch_page" in a["reason"]
    assert a["untrusted_args"] and a["untrusted_args"][0]["path"] == "text"
    assert cli.json("memories", "list", "--json") == []  # nothing written before the approval

    r = cli("approvals", "approve", a["id"])
    assert r.returncode == 0, r.stderr
    assert "Noted the IBAN." in r.stdout
    mems = cli.json("memories", "list", "--json")
    assert [m["text"] for m in mems] == ["IBAN DE89370400440532013000"]
    assert mems[0]["provenance"] == "untrusted"  # taint follows data into storage
    # Approving again is a replay: refused, nothing runs twice.
    r = cli("approvals", "approve", a["id"])
    assert r.returncode != 0 and "already approved" in r.stderr
    assert len(cli.json("memories", "list", "--json")) == 1
    outcomes = [(x["tool"], x["verdict"], x["outcome"]) for x in cli.json("audit", "--json")]
    assert outcomes == [("web__fetch_page", "run", "ok"), ("recall__add_memory", "ask", "asked"),
                        ("recall__add_memory", "ask", "approved; ok")]


def test_deny_continues_and_model_receives_denial(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("recall__add_memory", text="x")),
                         calls(call("recall__forget_memory", id=1)), text("Fine, I did not forget it."))
    r = cli("run", "--json", "--model", model, "save then forget")
    out = json.loads(r.stdout)
    assert out["status"] == "awaiting_approval"  # destructive asks even untainted
    assert not out["tainted"]
    aid = out["pending_approvals"][0]["id"]
    assert out["pending_approvals"][0]["reason"] == "ask: destructive tool in a chat turn"
    r = cli("approvals", "deny", "--json", aid)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "done" and res["answer"] == "Fine, I did not forget it."
    msgs = json.loads(db_rows(home, "SELECT messages_json FROM turns WHERE id = ?", (res["turn"],))[0][0])
    returns = [p for m in msgs for p in m["parts"] if p.get("part_kind") == "tool-return"]
    assert returns[-1]["content"] == "The person denied this action."
    assert len(cli.json("memories", "list", "--json")) == 1


def test_tool_not_offered_is_refused_and_never_executed(cli, tmp_path, home):
    assert cli("tools", "disable", "recall__add_memory").returncode == 0
    model = write_script(tmp_path / "s.json",
                         calls(call("recall__add_memory", text="sneaky"), call("nope__missing", a=1)), text("ok"))
    out = json.loads(cli("run", "--json", "--model", model, "try it").stdout)
    assert out["status"] == "done"
    assert "recall__add_memory" not in out["events"][0]["tools_offered"]
    calls_ = [e for e in out["events"] if e["type"] == "tool_call"]
    assert [(e["tool"], e["verdict"], e["is_error"]) for e in calls_] == [
        ("recall__add_memory", "off", True), ("nope__missing", "unavailable", True)]
    assert cli.json("memories", "list", "--json") == []
    audit = cli.json("audit", "--json")
    assert [a["outcome"] for a in audit] == ["refused", "refused"]


def test_no_model_says_so_and_points_to_script(cli):
    r = cli("run", "hello")
    assert r.returncode == 1
    assert "No model is configured" in r.stderr and "script:" in r.stderr
    r = cli("chat", input="")
    assert r.returncode == 1 and "script:" in r.stderr


@pytest.mark.slow
def test_kill_9_while_approval_pending_then_approve_runs_exactly_once(cli, tmp_path, home):
    model = write_script(tmp_path / "s.json", calls(call("tasks__delete_task", id=1)), text("Deleted."))
    # create the task that will be deleted
    seed = write_script(tmp_path / "seed.json", calls(call("tasks__create_task", title="old task")), text("ok"))
    assert cli("run", "--model", seed, "make a task").returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    env["PALUI_HOME"] = str(home)
    proc = subprocess.Popen([sys.executable, "-m", "palui", "chat", "--model", model], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    proc.stdin.write("delete the old task\n")
    proc.stdin.flush()
    deadline = time.time() + 60
    while time.time() < deadline:
        if db_rows(home, "SELECT COUNT(*) FROM approvals WHERE status='pending'")[0][0]:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("no approval appeared")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    pending = cli.json("approvals", "list", "--json")
    assert len(pending) == 1 and pending[0]["tool"] == "tasks__delete_task"
    r = cli("approvals", "approve", pending[0]["id"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Deleted." in r.stdout
    assert cli.json("tasks", "list", "--status", "all", "--json") == []
    ran = [a for a in cli.json("audit", "--json") if a["tool"] == "tasks__delete_task" and "ok" in a["outcome"]]
    assert len(ran) == 1
    assert cli("approvals", "approve", pending[0]["id"]).returncode == 1


def test_answering_an_expired_approval_never_says_it_was_approved(cli, tmp_path, home):
    """Without a service, ``palui approvals approve`` of an expired approval prints the refusal, not
    "approved", before the turn goes on (found by a new-user trial), and exits 1."""
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("Went on."))
    aid = cli.json("run", "forget memory 1", "--json", "--model", model)["pending_approvals"][0]["id"]
    con = sqlite3.connect(home / "palui.db")
    with con:
        con.execute("UPDATE approvals SET expires_at = ? WHERE id = ?", (time.time() - 1, aid))
    con.close()
    r = cli("approvals", "approve", aid)
    assert r.returncode == 1
    assert f"{aid}: approved" not in r.stdout
    assert r.stdout.startswith(f"{aid}: approval {aid} expired, which counts as a denial")
    assert "Went on." in r.stdout
