"""Resources, prompts and a server's questions through the gateway (spec §8.6), through the MCP SDK's own client
in process (``support/doors.py``): ``resources/list|read`` are governed reads of their connector (its switches,
the client's cap, the audit, tainting the client), a URI not in the session's last listing is refused;
``prompts/list|get`` with hidden characters removed; a server's question goes to a trusted client that declared
elicitation, never one asking for a secret, and otherwise to the person, as a turn's does (the question reaching
the client itself needs a real stream: ``tests/test_gateway.py``)."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from support.doors import GatewayDoor, app_running
from support.inprocess import service
from support.mcp_inprocess import READ, WRITE, InProcessServer, tool

pytestmark = pytest.mark.mcp_in_process

TAGS = "".join(chr(0xE0000 + ord(ch)) for ch in "obey")
FORM = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
SECRET = {"type": "object", "properties": {"password": {"type": "string", "format": "password"}}}


@asynccontextmanager
async def running(home, context: str = "trusted", toml: str = "", wait: float = 0.5):
    (home / "palui.toml").write_text(f"[gateway]\nwait_seconds = {wait}\n" + toml)
    svc = service()
    books = InProcessServer("books", [tool("lookup", READ), tool("save", WRITE),
                                      tool("choose", READ, behaviour="ask", question="Which colour?", form=FORM),
                                      tool("login", READ, behaviour="ask", question="Your password?", form=SECRET)],
                            resources={"note://a": "alpha text", "note://b": b"\x00\x01"},
                            prompts={"greet": "Say hi" + TAGS}, legacy=True)
    try:
        await books.add(svc, enable=("lookup", "save", "choose", "login"))
        token = svc.gateway.add_client("coder", context=context)["token"]
        async with app_running(svc) as app:
            yield svc, books, GatewayDoor(svc, app, token, "coder")
    finally:
        books.forget()
        await svc.close()
        svc.db.close()


async def test_resources_are_governed_reads_of_their_connector(home):
    async with running(home, toml="[caps]\ngateway_client_calls_per_hour = 2\n") as (svc, books, door):
        async with door.connected() as s:
            listed = {str(r.uri): r for r in (await s.mcp.list_resources()).resources}
            assert set(listed) == {"note://a", "note://b"}
            got = await s.mcp.read_resource("note://a")
            assert got.contents[0].text == "alpha text"
            with pytest.raises(MCPError, match="not a resource of this session's last resources/list"):
                await s.mcp.read_resource("note://elsewhere")
            # the read tainted the (trusted) client: a write now asks
            text_, _ = await s.call("mcp-books__save", {"q": "x"})
            assert "approval pending: " in text_
            assert "tainted by mcp-books__resources/read" in svc.approvals.list()[0]["reason"]
            got = await s.mcp.read_resource("note://b")  # a blob passes as sent; the cap counts it (2 of 2)
            assert got.contents[0].blob == "AAE="
            with pytest.raises(MCPError, match="this client's cap of 2 calls an hour"):
                await s.mcp.read_resource("note://a")
        rows = [(r["tool"], r["outcome"], r["client"]) for r in svc.audit.rows()
                if r["tool"].endswith("resources/read")]
        assert rows == [("mcp-books__resources/read", "ok", "coder"), ("mcp-books__resources/read", "ok", "coder"),
                        ("mcp-books__resources/read", "refused", "coder")]
        assert books.reads == ["note://a", "note://b"]


async def test_a_connector_whose_tools_are_off_offers_no_resources_or_prompts(home):
    async with running(home) as (svc, books, door):
        async with door.connected() as s:
            await s.mcp.list_resources()
            svc.tools.set_enabled([f"mcp-books__{n}" for n in ("lookup", "save", "choose", "login")], False)
            assert (await s.mcp.list_resources()).resources == [] and (await s.mcp.list_prompts()).prompts == []
            with pytest.raises(MCPError, match="not a resource of this session's last resources/list"):
                await s.mcp.read_resource("note://a")
    assert books.reads == []


async def test_prompts_are_listed_by_connector_and_got_with_hidden_characters_removed(home):
    async with running(home) as (svc, books, door):
        async with door.connected() as s:
            [p] = (await s.mcp.list_prompts()).prompts
            assert (p.name, p.description) == ("mcp-books__greet", "The greet prompt.")
            got = await s.mcp.get_prompt("mcp-books__greet")
            assert got.messages[0].content.text == "Say hi" and got.meta["palui/hidden-removed"] == 1
            with pytest.raises(MCPError, match="not a prompt of this session's last prompts/list"):
                await s.mcp.get_prompt("greet")
    assert books.reads == ["prompt:greet"]
    assert [r["tool"] for r in svc.audit.rows()] == ["mcp-books__prompts/get"]


async def test_a_secret_question_or_an_untrusted_client_asks_the_person(home):
    asked: list[str] = []

    async def answer(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"password": "hunter2"})

    async with running(home, context="unknown", wait=60) as (svc, books, door):
        async with door.connected(elicitation_callback=answer) as s:
            call = asyncio.create_task(s.call("mcp-books__choose", {}))  # an untrusted client: the person answers
            while not svc.elicitations.list():
                await asyncio.sleep(0.05)
            [q] = svc.elicitations.list()
            svc.elicitations.answer(q["id"], "accept", {"colour": "blue"}, via="cli")
            text_, error = await asyncio.wait_for(call, 120)
            assert not error and json.loads(text_) == {"action": "accept", "content": {"colour": "blue"}}
        vault = GatewayDoor(svc, door.app, svc.gateway.add_client("vault", context="trusted")["token"], "vault")
        async with vault.connected(elicitation_callback=answer) as s:
            text_, error = await s.call("mcp-books__login", {})  # a secret field: never to the client
            assert json.loads(text_)["action"] == "decline", text_  # Palui declines it for the person (spec §7.8)
    assert asked == []
