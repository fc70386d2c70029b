"""A held call's stored shape (``turns.pending_json``, spec §4-§5): the words and keys every Palui wrote.

A turn paused by an earlier Palui must resume: the states are stored as the words ``todo``, ``asked``,
``sent``, ``eliciting`` and ``done``, and the keys are the ones below, in this order.
"""

from __future__ import annotations

import json

import pytest

from palui.runner import state as st
from palui.runner.pending import CallState, from_stored
from support.scripts import call, calls, text, write_script

# Every state and key a held call was ever stored with, as an earlier Palui wrote them.
STORED = (
    '[{"id": "c1", "tool": "recall__add_memory", "args": {"text": "a"}, "state": "done", "bad_args": null,'
    ' "result": "Saved memory 1.", "is_error": false},'
    ' {"id": "c2", "tool": "recall__forget_memory", "args": {"id": 1}, "state": "asked", "bad_args": null,'
    ' "approval": "a-0123456789", "reason": "ask: destructive tool in a chat turn"},'
    ' {"id": "c3", "tool": "mcp-h__ask", "args": {}, "state": "eliciting", "bad_args": null, "elicit":'
    ' {"round": 1, "asked": 1, "request_state": "opaque", "ids": ["e-0123456789"], "verdict": "run", "reason": ""}},'
    ' {"id": "c4", "tool": "mcp-h__slow", "args": {}, "state": "sent", "bad_args": null},'
    ' {"id": "c5", "tool": "recall__search_memories", "args": {}, "state": "todo",'
    ' "bad_args": "arguments are not valid JSON: x"},'
    ' {"id": "c6", "tool": "recall__forget_memory", "args": {"id": 2}, "state": "done", "bad_args": null,'
    ' "result": "The person denied this action.", "is_error": true, "outcome": "denied"}]'
)


def test_the_call_states_are_the_stored_words():
    assert [(s.name, s.value) for s in CallState] == [
        ("TODO", "todo"), ("ASKED", "asked"), ("SENT", "sent"), ("ELICITING", "eliciting"), ("DONE", "done")]


def test_stored_calls_load_as_call_states_and_store_back_byte_for_byte():
    calls_ = from_stored(json.loads(STORED))
    assert [c["state"] for c in calls_] == [CallState.DONE, CallState.ASKED, CallState.ELICITING, CallState.SENT,
                                            CallState.TODO, CallState.DONE]
    assert all(type(c["state"]) is CallState for c in calls_)
    assert json.dumps(calls_) == STORED


def test_a_state_no_palui_wrote_is_refused():
    with pytest.raises(ValueError, match="'running'"):
        from_stored([{"id": "c1", "tool": "t", "args": {}, "state": "running", "bad_args": None}])


async def test_a_turn_paused_in_todays_shape_resumes(svc, tmp_path):
    """The runner writes today's shape, and a turn whose ``pending_json`` holds it as plain words resumes:
    the approved call runs, then the call held behind it."""
    model = write_script(tmp_path / "s.json",
                         calls(call("recall__forget_memory", id=1), call("recall__add_memory", text="milk")),
                         text("done"))
    r = await svc.turns.send("forget 1, then remember milk", model=model)
    assert r["status"] == "awaiting_approval"
    [a] = r["pending_approvals"]
    stored = svc.db.one("SELECT pending_json FROM turns WHERE id = ?", (r["turn"],))[0]
    first, second = (c["id"] for c in json.loads(stored))
    today = (
        f'[{{"id": "{first}", "tool": "recall__forget_memory", "args": {{"id": 1}}, "state": "asked",'
        f' "bad_args": null, "approval": "{a["id"]}", "reason": "ask: destructive tool in a chat turn"}},'
        f' {{"id": "{second}", "tool": "recall__add_memory", "args": {{"text": "milk"}}, "state": "todo",'
        f' "bad_args": null}}]'
    )
    assert stored == today  # what this Palui writes is today's shape, byte for byte
    with svc.db.write() as c:  # …and what an earlier Palui wrote (the same text, written here by hand) is read
        c.execute("UPDATE turns SET pending_json = ? WHERE id = ?", (today, r["turn"]))
    assert [c["state"] for c in st.load(svc.db, r["turn"]).pending] == [CallState.ASKED, CallState.TODO]
    r = await svc.approvals.answer_and_resume(a["id"], True, "cli")
    assert r["status"] == "done" and r["answer"] == "done"
    ran = [(x["tool"], x["outcome"]) for x in svc.audit.rows(r["turn"])]
    assert ran == [("recall__forget_memory", "asked"), ("recall__forget_memory", "approved; error"),
                   ("recall__add_memory", "ok")]
    assert [m["text"] for m in svc.memories.list()] == ["milk"]
    assert svc.db.one("SELECT pending_json FROM turns WHERE id = ?", (r["turn"],))[0] is None
