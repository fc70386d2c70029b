"""What a gateway session cannot reset, and the brake over the gateway (spec §5.7, §8.6), through the MCP SDK's
own client, in process (``support/doors.py``: the SDK's client over the ASGI transport against the service's
app, a real connector reaching an in-process MCP server).

A gateway client, not a session, carries its taint, the calls the person denied and its loop counts, until the
person clears it (``palui gateway clients clear NAME``): a trusted client's second session after a tainting read
asks for a write; a call denied in one session is ``denied before`` in the next; three identical writes over two
sessions stop the client's tool use (a client's reads are never repeats), and the identical retry that waits on or
consumes its approval is no repeat.
The emergency brake pauses the gateway as it pauses jobs: a new session's read is refused until ``palui gateway
resume`` while a chat turn runs its read, ``status`` says so, and a hanging call ends within a second, audited
``cancelled; may have run``. A connector that never answers ``initialize`` refuses a call within the bound.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from support.doors import GatewayDoor, app_running
from support.mcp_inprocess import DESTRUCTIVE, READ, WRITE, InProcessServer, never_answers, tool
from support.scripts import call, calls, text, write_script

# The tests' own MCP servers run in this process, through the connector's transport seam (support/mcp_inprocess.py).
pytestmark = pytest.mark.mcp_in_process


def _books() -> InProcessServer:
    return InProcessServer("books", [tool("lookup", READ), tool("save", WRITE), tool("wipe", DESTRUCTIVE),
                                     tool("hang", READ, behaviour="hang")])


@asynccontextmanager
async def gateway(home, toml: str = "", context: str = "trusted"):
    """A service with the in-process server behind ``mcp-books`` (every tool on), a client ``coder``, and its app
    running; yields ``(svc, books, open_session)``, where ``open_session()`` is a new MCP session of the client."""
    from support.inprocess import service

    (home / "palui.toml").write_text("[gateway]\nwait_seconds = 0.2\n" + toml)
    svc = service()
    books = _books()
    try:
        await books.add(svc, enable=("lookup", "save", "wipe", "hang"))
        token = svc.gateway.add_client("coder", context=context)["token"]
        async with app_running(svc) as app:
            def session(client: str = "coder", key: str | None = None) -> Any:
                return GatewayDoor(svc, app, key or token, client).connected()
            yield svc, books, session
    finally:
        books.forget()
        await svc.close()
        svc.db.close()


def pending_id(text_: str) -> str:
    assert "approval pending: " in text_, text_
    return text_.split("approval pending: ")[1].split(".")[0]


async def test_a_trusted_clients_second_session_after_a_tainting_read_asks_for_a_write(home):
    async with gateway(home) as (svc, books, session):
        async with session() as early:  # open before the taint: its next write asks too
            await early.mcp.list_tools()
            async with session() as a:
                text_, error = await a.call("mcp-books__lookup", {"q": "page"})  # an MCP result taints the client
                assert not error
            async with session() as b:  # a new session of the same client
                text_, _ = await b.call("mcp-books__save", {"q": "after"})
                aid = pending_id(text_)
                assert "write tool in a tainted gateway session (tainted by mcp-books__lookup" in \
                    svc.approvals.get(aid)["reason"]
            text_, _ = await early.call("mcp-books__save", {"q": "early"})
            pending_id(text_)
    assert [c for c, _ in books.calls] == ["lookup"]


async def test_a_call_denied_in_one_session_is_denied_before_in_the_next_until_the_client_is_cleared(home, cli):
    async with gateway(home) as (svc, books, session):
        async with session() as a:
            text_, _ = await a.call("mcp-books__wipe", {"q": "all"})
            svc.approvals.answer(pending_id(text_), False, "cli", reason="never")
            text_, _ = await a.call("mcp-books__wipe", {"q": "all"})
            assert text_.startswith("The person denied this same call earlier for this client: never.")
        async with session() as b:
            text_, error = await b.call("mcp-books__wipe", {"q": "all"})
            assert error and text_.startswith("The person denied this same call earlier for this client")
            assert svc.audit.rows()[-1]["outcome"] == "denied before"
            r = await asyncio.to_thread(cli, "gateway", "clients", "clear", "coder")
            assert r.returncode == 0 and "ended 1 open session(s)" in r.stdout, r.stderr
            with pytest.raises(MCPError, match="Session not found"):  # its session ended with the clear: 404
                await b.call("mcp-books__wipe", {"q": "all"})
        async with session() as c:  # a fresh start: asked again
            text_, _ = await c.call("mcp-books__wipe", {"q": "all"})
            pending_id(text_)
    assert books.calls == []


async def test_deny_and_stop_stops_the_client_and_a_standing_approval_answers_its_next_sessions(home, cli):
    """Spec §5.9, §5.10 through the gateway door: a standing approval made from a client's ask answers that client
    (context ``gateway:coder``) in a later session, never another client; "deny and stop" ends the client's tool
    use until the person clears it."""
    async with gateway(home) as (svc, books, session):
        other = svc.gateway.add_client("other", context="trusted")["token"]
        async with session() as a:
            await a.call("mcp-books__lookup", {"q": "page"})  # tainted: a write asks
            text_, _ = await a.call("mcp-books__save", {"q": "the note"})
            aid = pending_id(text_)
            done = svc.approvals.answer(aid, True, "cli", always={"q": "any"})
            [rule] = svc.approvals.rules.list()
            assert (rule["id"], rule["context"]) == (done["rule_made"], "gateway:coder")
            assert not (await a.call("mcp-books__save", {"q": "the note"}))[1]  # consumes its approval
        async with session() as b:  # (a value an earlier result echoed would carry a mark: never answered)
            text_, error = await b.call("mcp-books__save", {"q": "another note"})
            assert not error, text_  # answered in advance: no approval waits
            assert svc.approvals.list("pending") == []
            assert svc.audit.rows()[-2]["reason"].endswith(f"; approved in advance by rule {rule['id']}")
        from support.doors import GatewayDoor, app_running

        async with app_running(svc) as app, GatewayDoor(svc, app, other, "other").connected() as o:
            await o.call("mcp-books__lookup", {"q": "page"})
            text_, _ = await o.call("mcp-books__save", {"q": "a third note"})
            pending_id(text_)  # another client: the standing approval is coder's
        async with session() as c:
            text_, _ = await c.call("mcp-books__wipe", {"q": "all"})
            svc.approvals.answer(pending_id(text_), False, "cli", stop=True)  # the call had returned "pending"
            for again in ("mcp-books__wipe", "mcp-books__lookup"):  # its retry, and every later call
                text_, error = await c.call(again, {"q": "all"})
                assert error and text_ == ("Error: not run: this client's tool calls end here (the person denied a "
                                           "call and stopped the tool use)."), text_
        assert (await asyncio.to_thread(cli, "gateway", "clients", "clear", "coder")).returncode == 0
        async with session() as d:
            assert not (await d.call("mcp-books__lookup", {"q": "anything"}))[1]


async def test_loop_stops_apply_per_client_and_a_retry_on_its_approval_is_no_repeat(home, cli):
    async with gateway(home) as (svc, books, session):
        svc.tools.set_trusted("mcp-books")  # its results do not taint: the trusted client's writes run
        async with session() as a:
            # asked, then retried while the approval waits and once it is approved: never a repeat
            text_, _ = await a.call("mcp-books__wipe", {"q": "x"})
            aid = pending_id(text_)
            for _ in range(3):
                text_, _ = await a.call("mcp-books__wipe", {"q": "x"})
                assert pending_id(text_) == aid
            svc.approvals.answer(aid, True, "cli")
            text_, error = await a.call("mcp-books__wipe", {"q": "x"})
            assert not error and text_ == 'wipe: {"q": "x"}'
            for _ in range(2):
                assert not (await a.call("mcp-books__save", {"q": "same"}))[1]
            for _ in range(3):  # a client's reads are never repeats (spec §6.3, §8.6): a later look is fresh data
                assert not (await a.call("mcp-books__lookup", {"q": "same"}))[1]
        async with session() as b:  # the third identical write, in another session: the client's tool use ends
            text_, error = await b.call("mcp-books__save", {"q": "same"})
            assert error and text_ == ("Error: not run: this client's tool calls end here (budgets.repeat_calls: "
                                       "mcp-books__save was called a 3rd time with the same arguments by this "
                                       "client).")
            text_, error = await b.call("mcp-books__lookup", {"q": "other"})  # and every later call
            assert error and "this client's tool calls end here" in text_
        assert await asyncio.to_thread(cli, "gateway", "clients", "clear", "coder")
        async with session() as c:
            assert not (await c.call("mcp-books__save", {"q": "same"}))[1]
    assert [c for c, _ in books.calls] == ["wipe", "save", "save", "lookup", "lookup", "lookup", "save"]


async def test_the_brake_pauses_the_gateway_until_it_is_resumed_and_chat_turns_start_as_usual(home, tmp_path, cli):
    async with gateway(home) as (svc, books, session):
        async with session() as before:
            await before.mcp.list_tools()
            stopped = await asyncio.to_thread(cli, "stop", "--all")
            assert stopped.returncode == 0 and "the gateway until palui gateway resume" in stopped.stdout
            text_, error = await before.call("mcp-books__lookup", {"q": "a"})  # an open session: refused
            assert error and "Palui is paused by the emergency brake (palui gateway resume)" in text_
        async with session() as after:  # a new session is refused too: no session opens
            text_, error = await after.call("mcp-books__lookup", {"q": "a"})
            assert error and text_ == "Error: Palui is paused by the emergency brake (palui gateway resume)"
        status = await asyncio.to_thread(cli.json, "status", "--json")
        assert status["gateway_paused"]["by"] == "cli"
        assert "gateway: paused by the emergency brake (palui gateway resume)" in \
            (await asyncio.to_thread(cli, "status")).stdout
        # a chat turn after the brake starts as usual and runs its read
        model = write_script(tmp_path / "s.json", calls(call("mcp-books__lookup", q="chat")), text("done"))
        r = await svc.turns.send("look it up", model=model)
        assert r["status"] == "done" and [e["result"] for e in r["events"] if e["type"] == "tool_call"] == \
            ['lookup: {"q": "chat"}']
        assert (await asyncio.to_thread(cli, "gateway", "resume")).stdout.strip() == "gateway resumed"
        async with session() as again:
            text_, error = await again.call("mcp-books__lookup", {"q": "b"})
            assert not error and text_ == 'lookup: {"q": "b"}'
        assert (await asyncio.to_thread(cli, "gateway", "resume")).stdout.strip() == "the gateway was not paused"


async def test_the_brake_ends_a_hanging_gateway_call_within_a_second(home):
    async with gateway(home) as (svc, books, session):
        async with session() as s:
            running = asyncio.create_task(s.call("mcp-books__hang", {"q": "forever"}))
            await asyncio.wait_for(books.started.wait(), 120)
            pulled = time.monotonic()
            svc.brake.stop_all("cli")
            text_, error = await asyncio.wait_for(running, 120)
            took = time.monotonic() - pulled
        assert error and text_ == ("Error: the call was stopped while it ran, and it may have run: Palui is paused by "
                                   "the emergency brake (palui gateway resume).")
        assert took < 1.0, took
        assert [(r["tool"], r["outcome"]) for r in svc.audit.rows() if r["origin"] == "gateway"] == [
            ("mcp-books__hang", "cancelled; may have run")]


async def test_a_connector_that_never_answers_initialize_refuses_a_gateway_call_within_the_bound(home):
    from support import mcp_inprocess

    async with gateway(home, "[mcp]\ncall_timeout_seconds = 1\n") as (svc, books, session):
        mcp_inprocess.SERVED[books.url] = never_answers  # the server now starts and never answers anything
        await svc._hub.close()  # no live connection: the call has to start it
        async with session() as s:
            started = time.monotonic()
            text_, error = await s.call("mcp-books__lookup", {"q": "a"})
            took = time.monotonic() - started
        # the connector's own start bound (1 s) answers first: "did not finish the MCP handshake within 1 s", or,
        # on a loaded machine, "still starting after 1 s"
        assert error and "connector mcp-books is not available" in text_, text_
        assert "within 1 s" in text_ or "after 1 s" in text_, text_
        assert took < 10, took
        [row] = [r for r in svc.audit.rows() if r["origin"] == "gateway"]
        assert (row["outcome"], row["verdict"]) == ("error", "run")


@pytest.mark.parametrize("context,tainted", [("trusted", False), ("unknown", True)])
async def test_a_session_starts_with_its_clients_context(home, context, tainted):
    async with gateway(home, context=context) as (svc, books, session):
        async with session() as s:
            text_, error = await s.call("mcp-books__save", {"q": "a"})
        assert ("approval pending" in text_) is tainted
        if tainted:
            assert "(tainted by the client's unseen context)" in svc.approvals.list(status=None)[-1]["reason"]


def test_a_call_in_flight_when_the_service_ended_is_audited_when_it_starts_again(svc):
    """A gateway call's ``sent`` marker is its session's held call while it runs: a service that died with one in
    flight leaves it, and the next start ends the session and audits the call ``cancelled; may have run``."""
    import json

    svc.gateway.add_client("coder", context="trusted")
    session = svc.gateway.open_session("coder")
    turn = svc.db.row("SELECT turn_id FROM gateway_sessions WHERE id = ?", (session,))[0]
    in_flight = [{"id": "gc-1", "tool": "mcp-books__hang", "args": {"q": "x"}, "state": "sent", "bad_args": None}]
    with svc.db.write() as c:
        c.execute("UPDATE turns SET pending_json = ? WHERE id = ?", (json.dumps(in_flight), turn))
    assert svc.gateway.end_open_sessions("the service restarted") == [session]
    [row] = svc.audit.rows(turn)
    assert (row["tool"], row["outcome"], row["verdict"]) == ("mcp-books__hang", "cancelled; may have run", "run")
    assert row["reason"] == "the service restarted while the call was in flight"
    assert (row["client"], row["session"]) == ("coder", session)


async def test_a_client_at_its_cap_leaves_another_calling_and_only_calls_sent_count(home):
    """Per-client caps (spec §8.6): guessed names, a switched-off tool and a tool outside the client's connectors
    cost nothing; the client at its cap is refused saying when the next call is possible, while another client
    still calls; the counts are a row per client and minute."""
    toml = "[caps]\ngateway_client_calls_per_hour = 2\n[budgets]\nerror_streak = 0\n"  # the guesses are no loop here
    async with gateway(home, toml) as (svc, books, session):
        other = svc.gateway.add_client("other", context="trusted", calls_per_hour=5)["token"]
        svc.tools.set_enabled(["mcp-books__wipe"], False)
        async with session() as s:
            for guess in ("mcp-books__secret", "mcp-books__admin", "mcp-vault__read", "mcp-books__wipe"):
                text_, error = await s.call(guess, {"q": "x"})
                assert error and "cannot be called" in text_, text_
            text_, error = await s.call("mcp-books__lookup", {"q": "nope"} | {"extra": 1})  # arguments refused
            assert error and "was not called" in text_, text_
            for q in ("one", "two"):
                assert not (await s.call("mcp-books__lookup", {"q": q}))[1]
            text_, error = await s.call("mcp-books__lookup", {"q": "three"})
            assert error and "this client's cap of 2 calls an hour" in text_ and "UTC" in text_, text_
        async with session("other", other) as o:  # another client is not held by coder's cap
            text_, error = await o.call("mcp-books__lookup", {"q": "mine"})
            assert not error and text_ == 'lookup: {"q": "mine"}'
        counted = {r["client"]: r["calls"] for r in svc.db.all("SELECT client, SUM(calls) AS calls FROM"
                                                               " gateway_call_minutes GROUP BY client")}
        assert counted == {"coder": 2, "other": 1, "": 3}
        assert svc.audit.rows()[-2]["outcome"] == "refused: over cap"
    assert [a["q"] for c, a in books.calls] == ["one", "two", "mine"]


async def test_gateway_results_are_kept_by_retention_gateway_days_while_a_session_is_open(home, tmp_path):
    """What a client's calls returned is pruned after ``retention.gateway_days`` even while its session is open;
    a chat conversation's untrusted content of the same age stays until ``retention.days`` (spec §10.2)."""
    async with gateway(home, "[retention]\ngateway_days = 2\n") as (svc, books, session):
        model = write_script(tmp_path / "s.json", calls(call("mcp-books__lookup", q="chat")), text("done"))
        assert (await svc.turns.send("look it up", model=model))["status"] == "done"
        async with session() as s:
            assert not (await s.call("mcp-books__lookup", {"q": "page"}))[1]
            count = "SELECT COUNT(*) FROM untrusted_content u JOIN conversations c ON c.id = u.conversation_id" \
                    " WHERE c.origin = ?"
            assert svc.db.row(count, ("gateway",))[0] == 1 and svc.db.row(count, ("chat",))[0] == 1
            svc.maintenance.prune_expired(time.time() + 3 * 86400)  # the session is still open
            assert svc.db.row(count, ("gateway",))[0] == 0 and svc.db.row(count, ("chat",))[0] == 1
            assert svc.db.row("SELECT untrusted_pruned_at IS NOT NULL FROM conversations WHERE origin = 'gateway'")[0]
