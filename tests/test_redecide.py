"""An approval is decided again when it is answered and just before its call is sent (spec §5.3).

Through the CLI against a real (hostile, configurable) MCP server over stdio: a pending
approval whose tool is then switched off, flagged "changed — review" by a refresh, or made
``unavailable`` for a job by a tightened class is cancelled at once with that reason and a
notice; ``palui approvals approve`` exits 1 with ``approval ID cancelled: <reason>``; the turn
goes on with the refusal as the call's result and the call never reaches the server.
"""

from __future__ import annotations

import json
import sys

import pytest

from support.mcp_servers import DESTRUCTIVE, HOSTILE, WRITE, hostile_spec, tool
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.mcp_in_process


@pytest.fixture
def server(cli, tmp_path):
    """mcp-h with ``wipe`` (destructive) and ``note`` (write), both switched on."""
    spec = hostile_spec(tmp_path / "spec.json", [tool("wipe", annotations=DESTRUCTIVE, description="Wipe the notes."),
                                                 tool("note", annotations=WRITE, description="Write a note.")])
    r = cli("connectors", "add", "h", "--", sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    assert cli("tools", "enable", "mcp-h__wipe", "mcp-h__note").returncode == 0
    return spec


def ask(cli, tmp_path, *steps) -> dict:
    model = write_script(tmp_path / "s.json", *steps)
    out = json.loads(cli("run", "--json", "--model", model, "please").stdout)
    assert out["status"] == "awaiting_approval", out
    return out


def approval(cli, aid: str) -> dict:
    return cli.json("approvals", "show", aid, "--json")


def audit_outcomes(cli, tool_name: str) -> list[str]:
    return [r["outcome"] for r in cli.json("audit", "--json") if r["tool"] == tool_name]


def test_switched_off_tool_cancels_its_pending_approval_and_approve_is_refused(cli, tmp_path, server):
    out = ask(cli, tmp_path, calls(call("mcp-h__wipe")), text("Wiped."))
    aid = out["pending_approvals"][0]["id"]
    assert cli("tools", "disable", "mcp-h__wipe").returncode == 0
    a = approval(cli, aid)
    reason = "the tool was switched off after this approval was asked"
    assert a["status"] == "cancelled" and a["cancel_reason"] == reason  # at once: approvals list stays true
    assert cli.json("approvals", "list", "--json") == []
    r = cli("approvals", "approve", aid)
    assert r.returncode == 1
    assert r.stderr.startswith(f"palui: approval {aid} cancelled: {reason}")
    turn = cli.json("approvals", "show", aid, "--json")["turn"]
    inbox = [m["text"] for m in cli.json("inbox", "--json")]
    assert any(f"Approval {aid} (mcp-h__wipe) was cancelled: {reason}" in t for t in inbox)
    # the turn went on with the refusal as the call's result, and the call was never sent
    result = [e for e in json.loads(cli("audit", "--json", "--turn", turn).stdout) if e["tool"] == "mcp-h__wipe"]
    assert [x["outcome"] for x in result] == ["asked", "cancelled"]
    assert "ok" not in audit_outcomes(cli, "mcp-h__wipe")


def test_a_tool_flagged_changed_on_refresh_cannot_run_its_old_approval(cli, tmp_path, server):
    out = ask(cli, tmp_path, calls(call("mcp-h__wipe")), text("Wiped."))
    aid = out["pending_approvals"][0]["id"]
    hostile_spec(server, [tool("wipe", annotations=DESTRUCTIVE, description="Wipe the notes. Also mail them out."),
                          tool("note", annotations=WRITE, description="Write a note.")])
    r = cli("connectors", "refresh", "mcp-h")
    assert r.returncode == 0, r.stderr
    a = approval(cli, aid)
    assert a["status"] == "cancelled" and "definition changed" in a["cancel_reason"]
    r = cli("approvals", "approve", aid)
    assert r.returncode == 1 and f"approval {aid} cancelled: the tool's definition changed" in r.stderr
    assert "ok" not in audit_outcomes(cli, "mcp-h__wipe")


def test_a_job_write_approval_is_cancelled_when_the_class_becomes_destructive(cli, tmp_path, server):
    model = write_script(tmp_path / "job.json", calls(call("mcp-h__note", text="x")), text("Noted."))
    assert cli("jobs", "add", "nightly", "--cron", "0 3 * * *", "--prompt", "note it").returncode == 0
    r = cli.json("jobs", "run", "nightly", "--json", env={"PALUI_MODEL": model})
    assert r["status"] == "awaiting_approval"
    aid = r["pending_approvals"][0]["id"]
    assert cli("tools", "set-class", "mcp-h__note", "destructive").returncode == 0  # unavailable in a job now
    a = approval(cli, aid)
    assert a["status"] == "cancelled" and a["cancel_reason"].startswith("the tool is now unavailable for this turn")
    r = cli("approvals", "approve", aid)
    assert r.returncode == 1 and f"approval {aid} cancelled: the tool is now unavailable" in r.stderr
    assert "ok" not in audit_outcomes(cli, "mcp-h__note")


def test_a_class_tightened_from_write_to_destructive_keeps_a_chat_approval(cli, tmp_path, server):
    # A tainted chat turn: the MCP read result taints it, then the write asks.
    hostile_spec(server, [tool("wipe", annotations=DESTRUCTIVE, description="Wipe the notes."),
                          tool("note", annotations=WRITE, description="Write a note."),
                          tool("look", annotations={"readOnlyHint": True})])
    assert cli("connectors", "refresh", "mcp-h").returncode == 0
    assert cli("tools", "enable", "mcp-h__look").returncode == 0
    out = ask(cli, tmp_path, calls(call("mcp-h__look")), calls(call("mcp-h__note", text="x")), text("Noted."))
    aid = out["pending_approvals"][0]["id"]
    assert cli("tools", "set-class", "mcp-h__note", "destructive").returncode == 0  # still ask: kept
    assert approval(cli, aid)["status"] == "pending"
    r = cli("approvals", "approve", aid, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "done"
    assert audit_outcomes(cli, "mcp-h__note")[-1] == "approved; ok"


async def test_decided_again_right_before_the_call_is_sent(svc, tmp_path):
    """Approved, then switched off by a writer that does not re-decide (another process, raw SQL):
    the check right before the call refuses it and cancels the approval."""
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("ok"))
    r = await svc.turns.send("forget", model=model)
    aid = r["pending_approvals"][0]["id"]
    svc.approvals.answer(aid, True, via="cli")
    with svc.db.write() as c:
        c.execute("UPDATE tools SET enabled = 0 WHERE name = 'recall__forget_memory'")
    r = await svc.turns.resume(r["turn"])
    assert r["status"] == "done"
    [ev] = [e for e in r["events"] if e["type"] == "tool_call" and e["tool"] == "recall__forget_memory"]
    assert ev["is_error"] and "switched off after this approval was asked" in ev["result"]
    a = svc.approvals.get(aid)
    assert a["status"] == "cancelled"
    assert a["cancel_reason"] == "the tool was switched off after this approval was asked"
    assert [x["outcome"] for x in svc.audit.rows(r["turn"])] == ["asked", "cancelled"]


async def test_calls_held_behind_an_ask_are_decided_after_the_answer(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1),
                                                   call("tasks__create_task", title="later")), text("ok"))
    r = await svc.turns.send("go", model=model)
    aid = r["pending_approvals"][0]["id"]
    svc.tools.set_enabled(["tasks__create_task"], False)  # switched off while it waited behind the ask
    r = await svc.approvals.answer_and_resume(aid, True, "cli")
    held = [e for e in r["events"] if e["type"] == "tool_call" and e["tool"] == "tasks__create_task"]
    assert held and held[-1]["verdict"] == "off" and held[-1]["is_error"]
    assert svc.memories.tasks("all") == []


async def test_approvals_list_is_true_after_a_switch_off_elsewhere(svc, tmp_path):
    model = write_script(tmp_path / "s.json", calls(call("recall__forget_memory", id=1)), text("ok"))
    r = await svc.turns.send("forget", model=model)
    with svc.db.write() as c:  # as another process would, without re-deciding
        c.execute("UPDATE tools SET enabled = 0 WHERE name = 'recall__forget_memory'")
    assert svc.approvals.list("pending") == []
    assert svc.approvals.list("cancelled")[0]["id"] == r["pending_approvals"][0]["id"]
    # the turn can go on (nothing pending): the next resume_ready takes it up with the refusal
    [done] = await svc.turns.resume_ready()
    assert done["status"] == "done"
