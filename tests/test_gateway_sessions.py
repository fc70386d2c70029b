"""A client's sessions (spec §8.6), through the MCP SDK's own client in process (``support/doors.py``) and the CLI:
``palui gateway sessions [--client NAME]`` lists them and ``--end ID`` ends one; an ended session answers 404
to every request; a client holds at most ``gateway.sessions_per_client`` sessions, the least recently used one
ending when it opens one more."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from mcp.shared.exceptions import MCPError

from support.doors import GatewayDoor, app_running
from support.inprocess import service
from support.mcp_inprocess import READ, InProcessServer, tool

pytestmark = pytest.mark.mcp_in_process


@asynccontextmanager
async def running(home, toml: str = ""):
    (home / "palui.toml").write_text(toml)
    svc = service()
    books = InProcessServer("books", [tool("lookup", READ)])
    try:
        await books.add(svc, enable=("lookup",))
        coder = svc.gateway.add_client("coder", context="trusted")["token"]
        other = svc.gateway.add_client("other", context="trusted")["token"]
        async with app_running(svc) as app:
            yield svc, (lambda: GatewayDoor(svc, app, coder, "coder")), GatewayDoor(svc, app, other, "other")
    finally:
        books.forget()
        await svc.close()
        svc.db.close()


async def test_sessions_are_listed_and_an_ended_one_answers_404_everywhere(home, cli):
    async with running(home) as (svc, coder, other):
        async with coder().connected() as a, other.connected() as b:
            assert not (await a.call("mcp-books__lookup", {"q": "x"}))[1]
            await b.mcp.list_tools()
            listed = await asyncio.to_thread(cli.json, "gateway", "sessions", "--json")
            assert sorted((s["client"], s["calls"]) for s in listed) == [("coder", 1), ("other", 0)]
            mine = await asyncio.to_thread(cli.json, "gateway", "sessions", "--client", "coder", "--json")
            [s] = mine
            r = await asyncio.to_thread(cli, "gateway", "sessions", "--end", s["id"])
            assert r.returncode == 0 and f"ended gateway session {s['id']} of coder (1 call(s))" in r.stdout
            for request in (a.mcp.list_tools(), a.mcp.call_tool("mcp-books__lookup", {"q": "y"})):
                with pytest.raises(MCPError, match="Session not found"):
                    await request
            await b.mcp.list_tools()  # another client's session goes on
            again = await asyncio.to_thread(cli, "gateway", "sessions", "--end", s["id"])
            assert again.returncode != 0 and "no open gateway session" in again.stderr
        ended = await asyncio.to_thread(cli.json, "gateway", "sessions", "--ended", "--json")
        assert {x["end_reason"] for x in ended if x["id"] == s["id"]} == {"the person ended it"}
        assert (await asyncio.to_thread(cli, "gateway", "sessions", "--client", "nobody")).returncode != 0


async def test_a_client_holds_at_most_sessions_per_client(home):
    async with running(home, "[gateway]\nsessions_per_client = 2\n") as (svc, coder, other):
        async with AsyncExitStack() as stack:
            doors = []
            for _ in range(3):
                d = await stack.enter_async_context(coder().connected())
                await d.mcp.list_tools()
                doors.append(d)
            with pytest.raises(MCPError, match="Session not found"):  # the least recently used one ended
                await doors[0].mcp.list_tools()
            for d in doors[1:]:
                await d.mcp.list_tools()
            open_ = [s for s in svc.gateway.sessions("coder")]
            assert len(open_) == 2
        ended = [s for s in svc.gateway.sessions("coder", ended=True) if s["ended_at"]]
        assert any(s["end_reason"] == "the client opened more sessions than gateway.sessions_per_client"
                   for s in ended)
