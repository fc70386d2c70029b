"""A call's arguments are checked once, at the governed call's argument step, for every door (spec §3.3).

After the door's offer, the switches and the review flag (a refused tool is not validated), before the Rule of Two
and the approval gate: arguments that are not a JSON object, that hold a number JSON cannot carry (``NaN``,
``Infinity``), an integer past what JSON carries exactly, a lone surrogate, nesting deeper than 64, more than
``limits.argument_chars`` characters, or that do not validate against the tool's input schema are refused as the
model's error, naming the place and the rule, never a value. Nothing is written for such a call: no approval, no
audit row, no event, no untrusted content; the model's own message stays in the history and is answered with
the error, so the history replays. Refusals count like other refused calls in the error streak (spec §6.3).
"""

from __future__ import annotations

import json
import math
import sqlite3

import pytest
from starlette.testclient import TestClient

from palui.policy.input_schema import MAX_SAFE_INTEGER, argument_problem, json_problem
from palui.runner import state as st
from support.doors import GatewayDoor, app_running
from support.mcp_inprocess import DESTRUCTIVE, InProcessServer, tool
from support.scripts import call, calls, text, write_script

# The tests' own MCP servers run in this process, through the connector's transport seam (support/mcp_inprocess.py).
pytestmark = pytest.mark.mcp_in_process

FORGET = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": False}


def told(svc, turn: str) -> dict[str, str]:
    """What the model was told of each call of the turn, by tool call id."""
    return {p.tool_call_id: p.content for m in st.load(svc.db, turn).messages for p in getattr(m, "parts", [])
            if p.part_kind == "tool-return"}


def nothing_stored_for(svc, turn: str, tool_name: str) -> None:
    assert [a for a in svc.audit.rows(turn) if a["tool"] == tool_name] == []
    assert [e for e in svc.conversations.turn_detail(turn)["events"] if e.get("tool") == tool_name] == []
    assert svc.db.row("SELECT COUNT(*) FROM approvals WHERE tool = ?", (tool_name,))[0] == 0


async def test_nan_and_infinity_from_a_scripted_model_are_refused_and_nothing_stored(svc, tmp_path, cli):
    model = write_script(tmp_path / "s.json",
                         calls(call("tasks__list_tasks", status=math.nan), call("recall__forget_memory", id=math.inf),
                               call("nope__missing", a=math.inf)),
                         text("done"))
    r = await svc.turns.send("list my tasks", model=model)
    assert r["status"] == "done"
    said = told(svc, r["turn"])
    assert said["s1c1"] == ("Error: the tool 'tasks__list_tasks' was not called: the arguments hold a number JSON "
                            "cannot carry (NaN or Infinity) at $.status.")
    assert said["s1c2"].endswith("(NaN or Infinity) at $.id.")
    for name in ("tasks__list_tasks", "recall__forget_memory"):
        nothing_stored_for(svc, r["turn"], name)
    # a tool that was not offered is refused at the offer, before the arguments: audited, its arguments not stored
    [refused] = svc.audit.rows(r["turn"])
    assert (refused["tool"], refused["outcome"]) == ("nope__missing", "refused")
    [event] = [e for e in svc.conversations.turn_detail(r["turn"])["events"] if e["type"] == "tool_call"]
    assert event["args"] == {}
    con = sqlite3.connect(svc.settings.db_path)
    assert con.execute("SELECT COUNT(*) FROM turn_events WHERE NOT json_valid(event)").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM untrusted_content").fetchone()[0] == 0
    con.close()
    v = cli("audit", "verify")
    assert v.returncode == 0 and v.stdout.startswith("audit chain intact: 1 row(s)"), v.stderr
    assert json.loads(cli("approvals", "list", "--all", "--json").stdout) == []
    # the history replays: the model's own call stays, answered with the error
    again = await svc.turns.send("and again", conversation=r["conversation"],
                                 model=write_script(tmp_path / "t.json", text("ok")))
    assert again["status"] == "done"


async def test_the_failing_call_of_the_issue_asks_nothing_through_either_door(home, tmp_path):
    """``recall__forget_memory {"id": "not-a-number", "extra": 1}`` used to be put to the person, approved, then
    fail ``unexpected argument 'extra'``. Through a turn it is refused at its argument step; the gateway offers
    no built-in tool, so there the same call to an MCP tool with the same schema is refused the same way."""
    from support.inprocess import service

    (home / "palui.toml").write_text("[gateway]\nwait_seconds = 0.2\n")
    svc = service()
    books = InProcessServer("books", [tool("forget", DESTRUCTIVE, FORGET)])
    try:
        await books.add(svc, enable=("forget",))
        bad = {"id": "not-a-number", "extra": 1}
        r = await svc.turns.send("forget it", model=write_script(tmp_path / "s.json",
                                                                 calls(call("recall__forget_memory", **bad),
                                                                       call("mcp-books__forget", **bad)), text("done")))
        assert r["status"] == "done" and r["pending_approvals"] == []
        said = told(svc, r["turn"])
        why = ("the arguments do not match the tool's input schema: at $: has extra, which the schema does not "
               "allow (additionalProperties)")
        assert said == {"s1c1": f"Error: the tool 'recall__forget_memory' was not called: {why}.",
                        "s1c2": f"Error: the tool 'mcp-books__forget' was not called: {why}."}
        token = svc.gateway.add_client("coder", context="trusted")["token"]
        async with app_running(svc) as app:
            async with GatewayDoor(svc, app, token, "coder").connected() as door:
                text_, error = await door.call("mcp-books__forget", bad)
                assert error and text_ == f"Error: the tool 'mcp-books__forget' was not called: {why}."
                text_, error = await door.call("recall__forget_memory", bad)
                assert error and "no tool of this client has this name" in text_
        assert svc.db.row("SELECT COUNT(*) FROM approvals")[0] == 0
        assert books.calls == []
    finally:
        books.forget()
        await svc.close()
        svc.db.close()


async def test_size_integers_surrogates_and_depth_are_refused_through_a_turn(home, tmp_path):
    from palui.service import Service

    (home / "palui.toml").write_text("[limits]\nargument_chars = 60\n[budgets]\nerror_streak = 0\n")
    svc = Service()
    deep: dict = {}
    cur = deep
    for _ in range(70):
        cur["a"] = {}
        cur = cur["a"]
    model = write_script(tmp_path / "s.json", calls(
        call("recall__search_memories", query="x" * 80), call("recall__forget_memory", id=2**60),
        call("recall__search_memories", query="\ud800"), call("recall__search_memories", query=deep),
        call("recall__search_memories", query="fine")), text("done"))
    r = await svc.turns.send("go", model=model)
    said = told(svc, r["turn"])
    assert "more than limits.argument_chars (60)" in said["s1c1"]
    assert f"an integer beyond ±{MAX_SAFE_INTEGER:,}" in said["s1c2"] and "at $.id" in said["s1c2"]
    assert "lone surrogate" in said["s1c3"] and "at $.query" in said["s1c3"]
    assert "nested deeper than 64 levels" in said["s1c4"]
    assert not said["s1c5"].startswith("Error")
    assert [a["outcome"] for a in svc.audit.rows(r["turn"])] == ["ok"]  # only the call that ran
    svc.db.close()


async def test_refused_arguments_count_in_the_error_streak(svc, tmp_path):
    bad = [call("recall__search_memories", query=i) for i in range(4)]  # an integer where a string is due
    r = await svc.turns.send("go", model=write_script(tmp_path / "s.json", calls(*bad), text("done")))
    assert r["status"] == "budget" and r["budget"].startswith("budgets.error_streak: 4 calls in a row")
    assert svc.audit.rows(r["turn"]) == []  # refused at the argument step: nothing written, the streak still counted


def test_the_pure_checks_name_the_place_and_the_rule_never_a_value():
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"id": {"type": "integer", "maximum": 10}}}}}}
    secret = "hunter2-secret-value"
    why = argument_problem({"items": [{"id": 1}, {"id": 1}, {"id": secret}]}, schema, 10_000)
    assert why == "the arguments do not match the tool's input schema: at $.items[2].id: must be integer (type)"
    why = argument_problem({"items": [{"id": 99}]}, schema, 10_000)
    assert why == ("the arguments do not match the tool's input schema: at $.items[0].id: is outside what the schema "
                   "allows (maximum 10)")
    assert json_problem([1, 2]) == "the arguments must be a JSON object"
    assert json_problem({"n": -math.inf}) == "the arguments hold a number JSON cannot carry (NaN or Infinity) at $.n"
    assert json_problem({"n": MAX_SAFE_INTEGER}) is None and json_problem({"n": -MAX_SAFE_INTEGER - 1}) is not None
    assert json_problem({"ok": True, "n": 2.5, "s": "é", "l": [None]}) is None
    # a format is an annotation, and a pattern the server's own: neither is asserted (a hostile pattern cannot
    # backtrack for hours on a model's string here); a $ref outside the schema is never fetched
    assert argument_problem({"q": "a" * 40 + "!"}, {"type": "object", "properties": {
        "q": {"type": "string", "pattern": "^(a+)+$"}}}, 10_000) is None
    assert argument_problem({"when": "not a date"}, {"type": "object", "properties": {
        "when": {"type": "string", "format": "date-time"}}}, 10_000) is None
    why = argument_problem({"a": 1}, {"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}},
                           10_000)
    assert why is not None and "could not be applied" in why
    # the validator follows the schema's $schema: draft 4's exclusiveMaximum is a boolean
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
              "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}}}
    assert argument_problem({"n": 5}, draft4, 10_000) is not None and argument_problem({"n": 4}, draft4, 10_000) is None


@pytest.mark.slow
def test_nan_and_infinity_through_a_fake_openai_compatible_provider(cli, monkeypatch):
    """A real provider's arguments arrive as a JSON string, and the parsers accept ``NaN`` and ``Infinity``: the
    OpenAI client library receives ``{"status": NaN}`` from the wire and the call is refused, nothing stored."""
    from support.fake_llm import FakeLLM

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeLLM() as fake:
        fake.tool_call("tasks__list_tasks", {"status": math.nan})
        fake.tool_call("recall__search_memories", {"query": "x", "limit": math.inf})
        fake.text("Nothing to list.")
        out = json.loads(cli("run", "--json", "--model", f"openai:gpt-test@{fake.openai_url}", "list my tasks").stdout)
        sent = [m.body for m in fake.requests]
    assert out["status"] == "done" and out["answer"] == "Nothing to list."
    assert [e for e in out["events"] if e["type"] == "tool_call"] == []
    results = [r["content"] for body in sent[1:] for r in [m for m in body["messages"] if m.get("role") == "tool"]]
    assert any("(NaN or Infinity) at $.status" in r for r in results), results
    assert any("(NaN or Infinity) at $.limit" in r for r in results), results
    v = cli("audit", "verify")
    assert v.returncode == 0 and "audit chain intact: 0 row(s)" in v.stdout, v.stdout + v.stderr
    with TestClient(__import__("palui.server.app", fromlist=["create_app"]).create_app(
            __import__("palui.service", fromlist=["Service"]).Service(), "tok", port=8765),
            base_url="http://127.0.0.1:8765", headers={"Authorization": "Bearer tok"}) as client:
        assert client.get(f"/api/turns/{out['turn']}").status_code == 200
        assert client.get("/api/approvals", params={"all": 1}).status_code == 200
