"""One door per decision (spec §5.6): every front end answers approvals through the service's
``answer_approval``; a conversation runs one turn at a time.

Against a real ``palui serve``: the CLI (through the live service), the JSON API and the web
page's form answer the same kind of approval, and see the same refusal for an expired one,
with ``answered_via`` recorded for each.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time

import httpx
import pytest

from palui.server.app import csrf_value, session_value
from support.live_service import LiveService, wait_for
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow


def flash_text(r: httpx.Response) -> dict:
    """The one-time message a web form's redirect carries."""
    raw = r.cookies.get("palui_flash") or re.search(r"palui_flash=([^;]+)", r.headers.get("set-cookie", "")).group(1)
    return json.loads(base64.urlsafe_b64decode(raw.strip('"') + "==="))


@pytest.fixture
def live(home, tmp_path):
    # Every turn asks: recall__forget_memory is destructive.
    model = write_script(tmp_path / "ask.json", calls(call("recall__forget_memory", id=1)), text("Done."))
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    with LiveService(home) as srv:
        yield srv


def new_approval(live) -> dict:
    r = live.post("/api/turns", {"message": "forget memory 1"})
    assert r["status"] == "awaiting_approval", r
    return r["pending_approvals"][0]


def answer_three_ways(live, cli, approvals: list[dict]) -> list[tuple[int, str]]:
    """Approve approvals[0] by the CLI, [1] by the JSON API, [2] by the web form. Returns
    (exit code or HTTP status, the refusal message or "") per answer."""
    out = []
    r = cli("approvals", "approve", approvals[0]["id"])
    out.append((r.returncode, r.stderr.strip().removeprefix("palui: ")))
    r = live.http.post(f"/api/approvals/{approvals[1]['id']}/approve", json={})
    out.append((r.status_code, r.json().get("error", "")))
    with httpx.Client(base_url=live.url, follow_redirects=False, timeout=20,
                      cookies={"palui_session": session_value(live.token)}) as browser:
        r = browser.post(f"/approvals/{approvals[2]['id']}/approve",
                         data={"csrf": csrf_value(live.token), "back": "/approvals"})
        assert r.status_code == 303
        f = flash_text(r)
        out.append((400 if f["kind"] == "error" else 200, f["text"] if f["kind"] == "error" else ""))
    return out


def test_cli_api_and_web_answer_through_one_door(live, cli):
    fresh = [new_approval(live) for _ in range(3)]
    results = answer_three_ways(live, cli, fresh)
    assert [code for code, _ in results] == [0, 200, 200], results
    by_id = {a["id"]: a for a in live.get("/api/approvals", all=1)}
    assert [by_id[a["id"]]["answered_via"] for a in fresh] == ["cli", "api", "web"]
    assert all(by_id[a["id"]]["status"] == "approved" for a in fresh)
    for a in fresh:  # each turn went on in the service, the approved call ran once
        assert live.wait_turn(a["turn"])["status"] == "done"

    # The same kind of approval, expired: the same refusal from every front end, and the turn goes on.
    stale = [new_approval(live) for _ in range(3)]
    live.rows("UPDATE approvals SET expires_at = ? WHERE id IN (?,?,?)", (time.time() - 1, *[a["id"] for a in stale]))
    results = answer_three_ways(live, cli, stale)
    assert [code for code, _ in results] == [1, 409, 400], results
    messages = {msg.replace(a["id"], "ID") for (_, msg), a in zip(results, stale, strict=True)}
    assert messages == {"approval ID expired, which counts as a denial; the turn goes on"}, messages
    by_id = {a["id"]: a for a in live.get("/api/approvals", all=1)}
    assert [by_id[a["id"]]["status"] for a in stale] == ["expired"] * 3
    assert [by_id[a["id"]]["answered_via"] for a in stale] == ["cli", "api", "web"]
    for a in stale:
        t = live.wait_turn(a["turn"])
        assert t["status"] == "done"
        assert any(e.get("denied") for e in t["events"] if e["type"] == "tool_call")
    # the refused call never reached the connector: no "ok" outcome for the stale turns
    outcomes = {r["turn"]: r["outcome"] for r in live.get("/api/audit") if r["tool"] == "recall__forget_memory"
                and r["outcome"] != "asked"}
    assert {outcomes[a["turn"]] for a in stale} == {"approval expired"}


def test_an_unknown_answer_channel_is_refused(svc):
    from palui.errors import UsageError

    with pytest.raises(UsageError, match="unknown answer channel"):
        svc.approvals.answer("a-1", True, via="Evil Channel!")


def test_two_messages_sent_quickly_to_one_conversation_run_one_after_the_other(home, tmp_path):
    # The first turn's model takes 1.5 s; a second message sent meanwhile waits as the next turn.
    model = write_script(tmp_path / "slow.json", {"text": "First answer.", "delay_seconds": 1.5})
    (home / "palui.toml").write_text(f'model = "{model}"\n')
    with LiveService(home) as live:
        conv = live.post("/api/conversations")["conversation"]
        first: dict = {}
        t = threading.Thread(target=lambda: first.update(live.post("/api/turns", {"message": "one",
                                                                                  "conversation": conv})))
        t.start()
        wait_for(lambda: live.count("turns", "status = 'running'") == 1, what="the first turn to run")
        second = live.post("/api/turns", {"message": "two", "conversation": conv})
        assert second["status"] == "queued"
        running = live.rows("SELECT id FROM turns WHERE status = 'running'")[0][0]
        assert second["queued_behind"] == running
        assert second["queued_reason"] == f"queued behind the running turn {running}; /stop cancels it"
        t.join(30)
        assert first["status"] == "done" and first["answer"] == "First answer."
        done = live.wait_turn(second["turn"], statuses=("done", "error", "stopped", "budget"))
        assert done["status"] == "done"
        rows = live.rows("SELECT id, created_at, updated_at FROM turns WHERE conversation_id = ? ORDER BY rowid",
                         (conv,))
        (a_id, _, a_end), (b_id, _, _) = rows
        assert a_id == first["turn"] and b_id == second["turn"]
        b_events = live.turn(b_id)["events"]
        b_first_step = min(e["time"] for e in b_events if e["type"] == "step")
        assert b_first_step >= a_end  # the second began only after the first had ended
        # The second turn's model saw the first turn's answer (the history is whole, no dangling call).
        assert live.count("runs", "turn_id IN (?, ?)", (a_id, b_id)) == 2


def test_a_queued_message_behind_a_waiting_turn_is_stopped_with_it(svc, tmp_path):
    """The reply says "/stop cancels it": /stop acts on the waiting turn and the one queued behind."""
    import asyncio

    model = write_script(tmp_path / "ask.json", calls(call("recall__forget_memory", id=1)), text("Done."))
    r = asyncio.run(svc.turns.send("forget", model=model))
    assert r["status"] == "awaiting_approval"
    tid = svc.turns.start("and then this", conversation=r["conversation"], model=model)
    queued = asyncio.run(svc.turns.run(tid))
    assert queued["status"] == "queued" and queued["queued_behind"] == r["turn"]
    assert "the turn waiting for approval" in queued["queued_reason"]
    assert sorted(svc.turns.stop(conversation=r["conversation"])) == sorted([r["turn"], tid])
    assert svc.turns.result(tid)["status"] == "stopped"


def test_a_denial_reason_reaches_the_model_from_every_front_end(live, home, cli):
    """``/deny ID REASON`` (docs/decisions/0071-deny-reasons.md) on the JSON API, the web page's Deny form (its
    reason field), the web chat, the terminal chat and ``palui approvals deny --reason``: stored with the approval
    and told to the model as the denial. A reason that is not text is refused before anything is answered."""
    from support.chatdrive import PipedChat

    fresh = [new_approval(live) for _ in range(5)]
    reasons = ["not via the API", "not from the sheet", "not in the web chat", "not from the terminal",
               "not from the command line"]
    r = live.http.post(f"/api/approvals/{fresh[0]['id']}/deny", json={"reason": 5})
    assert r.status_code == 400 and "reason" in r.json()["error"]
    assert live.get(f"/api/approvals/{fresh[0]['id']}")["status"] == "pending"
    r = live.http.post(f"/api/approvals/{fresh[0]['id']}/deny", json={"reason": reasons[0]})
    assert r.status_code == 200, r.text
    with httpx.Client(base_url=live.url, follow_redirects=False, timeout=20,
                      cookies={"palui_session": session_value(live.token)}) as browser:
        r = browser.post(f"/approvals/{fresh[1]['id']}/deny",
                         data={"csrf": csrf_value(live.token), "back": "/approvals", "reason": reasons[1]})
        assert r.status_code == 303 and flash_text(r)["kind"] == "ok"
        r = browser.post("/chat/command", data={"line": f"/deny {fresh[2]['id']} {reasons[2]}"},
                         headers={"X-Palui-CSRF": csrf_value(live.token)})
        assert r.status_code == 200, r.text
    with PipedChat(home) as chat:
        chat.wait_for("/help for commands.", 60)
        chat.send(f"/deny {fresh[3]['id']} {reasons[3]}")
        chat.wait_for(f"[{fresh[3]['id']} denied", 30)
    r = cli("approvals", "deny", fresh[4]["id"], "--reason", reasons[4])
    assert r.returncode == 0, r.stderr
    by_id = {a["id"]: a for a in live.get("/api/approvals", all=1)}
    for a, why, via in zip(fresh, reasons, ["api", "web", "web", "cli", "cli"], strict=True):
        assert (by_id[a["id"]]["status"], by_id[a["id"]]["deny_reason"], by_id[a["id"]]["answered_via"]) == \
            ("denied", why, via)
        t = live.wait_turn(a["turn"])
        [denied] = [e for e in t["events"] if e["type"] == "tool_call"]
        assert denied["result"] == f"The person denied this action: {why}"
