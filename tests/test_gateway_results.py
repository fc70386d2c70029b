"""Results as the upstream sent them (spec §8.6, docs/decisions/0187-gateway-results-as-sent.md), through the MCP
SDK's own client over HTTP in process (``support/doors.py``): an image arrives as an image; text, structured
content, resource links and ``isError`` as sent; a CRLF file byte for byte (carriage returns, tabs and backslashes
untouched); other hidden characters pass and are listed in ``_meta``; a result over ``mcp.max_output_bytes``
keeps what fits; the server's progress reaches the client, after Palui's own wait, always increasing."""

from __future__ import annotations

import asyncio
import base64
from contextlib import asynccontextmanager

import pytest

from support.doors import GatewayDoor, app_running
from support.inprocess import service
from support.mcp_inprocess import READ, WRITE, InProcessServer, tool

pytestmark = pytest.mark.mcp_in_process

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4).decode()
CRLF = "line one\r\n\tindented\r\nC:\\Users\\me\\notes.txt\r\n\\u000d is not a CR\r\n"
TAGS = "".join(chr(0xE0000 + ord(ch)) for ch in "obey")
RICH = {"content": [{"type": "text", "text": "two things"},
                    {"type": "image", "data": PNG, "mimeType": "image/png"},
                    {"type": "resource_link", "uri": "file:///notes/a.md", "name": "a.md", "mimeType": "text/markdown"},
                    {"type": "resource", "resource": {"uri": "file:///notes/b.md", "mimeType": "text/markdown",
                                                      "text": "# B"}}],
        "structuredContent": {"count": 2, "names": ["a.md", "b.md"]}, "isError": False}


def _server() -> InProcessServer:
    return InProcessServer("files", [
        tool("image", READ, behaviour="result", result={"content": [{"type": "image", "data": PNG,
                                                                     "mimeType": "image/png"}]}),
        tool("rich", READ, behaviour="result", result=RICH),
        tool("failing", READ, behaviour="result", result={"content": [{"type": "text", "text": "no such file"}],
                                                          "isError": True}),
        tool("crlf", READ, behaviour="text", text=CRLF),
        tool("hidden", READ, behaviour="text", text="read me" + TAGS),
        tool("slow", WRITE, behaviour="progress"),
    ])


@asynccontextmanager
async def running(home, toml: str = ""):
    (home / "palui.toml").write_text("[gateway]\nwait_seconds = 30\n" + toml)
    svc = service()
    files = _server()
    try:
        await files.add(svc, enable=("image", "rich", "failing", "crlf", "hidden", "slow"))
        token = svc.gateway.add_client("coder")["token"]  # its context unknown: a write asks
        async with app_running(svc) as app:
            async with GatewayDoor(svc, app, token, "coder").connected() as door:
                yield svc, door
    finally:
        files.forget()
        await svc.close()
        svc.db.close()


async def test_an_image_arrives_as_an_image_and_everything_else_as_sent(home):
    async with running(home) as (svc, door):
        r = await door.mcp.call_tool("mcp-files__image", {})
        assert not r.is_error and [c.type for c in r.content] == ["image"]
        assert r.content[0].data == PNG and r.content[0].mime_type == "image/png"
        r = await door.mcp.call_tool("mcp-files__rich", {})
        got = r.model_dump(mode="json", by_alias=True, exclude_none=True)
        assert {k: got.get(k) for k in RICH} == RICH
        r = await door.mcp.call_tool("mcp-files__failing", {})
        assert r.is_error and r.content[0].text == "no such file"
        # the audit keeps the call, and the model-visible text (events) shows the image as a placeholder
        assert [a["outcome"] for a in svc.audit.rows()][-3:] == ["ok", "ok", "error"]


async def test_a_crlf_file_arrives_byte_for_byte_and_hidden_characters_are_listed(home):
    async with running(home) as (svc, door):
        r = await door.mcp.call_tool("mcp-files__crlf", {})
        assert r.content[0].text == CRLF and (r.meta or {}).get("palui/hidden") is None
        r = await door.mcp.call_tool("mcp-files__hidden", {})
        assert r.content[0].text == "read me" + TAGS
        assert r.meta["palui/hidden"] == [{"at": "content[0].text", "count": 4,
                                           "characters": ["U+E006F", "U+E0062", "U+E0065", "U+E0079"]}]


async def test_a_result_over_the_output_limit_keeps_what_fits(home):
    async with running(home, "[mcp]\nmax_output_bytes = 1024\n") as (svc, door):
        r = await door.mcp.call_tool("mcp-files__rich", {})
        kinds = [c.type for c in r.content]
        assert kinds[0] == "text" and r.content[0].text == "two things"
        assert "image" not in kinds and any("image content (image/png) left out by Palui" in getattr(c, "text", "")
                                            for c in r.content), r.content


async def test_the_servers_progress_reaches_the_client_after_the_wait_always_increasing(home):
    async with running(home) as (svc, door):
        notes: list[tuple[float, float | None, str | None]] = []

        async def note(progress: float, total: float | None, message: str | None) -> None:
            notes.append((progress, total, message))

        call = asyncio.create_task(door.mcp.call_tool("mcp-files__slow", {}, progress_callback=note))  # a write
        while not svc.approvals.list():  # it asks first, and waits for the person
            await asyncio.sleep(0.05)
        svc.approvals.answer(svc.approvals.list()[0]["id"], True, "cli")
        r = await asyncio.wait_for(call, 120)
        assert not r.is_error and r.content[0].text == "done"
        waited = [m for _, _, m in notes if "waiting for the person" in (m or "")]
        assert [m for _, _, m in notes[len(waited):]] == ["step 1", "step 2", "step 3"]  # the server's own
        values = [v for v, _, _ in notes]
        assert values == sorted(values) and len(set(values)) == len(values)  # counted on after the wait


async def test_progress_after_the_wait_is_counted_on_from_where_the_wait_ended():
    from palui.gateway.calls import Told

    sent: list[tuple[float, float | None, str | None]] = []

    class Session:
        async def send_progress_notification(self, token, value, total, message, related_request_id=None):
            sent.append((value, total, message))

    class Ctx:
        session, request_id = Session(), 7

    told = Told(Ctx(), "t")
    for done in (0.0, 1.0, 2.0):  # Palui's wait for the person: 0 is not progress yet
        await told(done, 30.0, "waiting")
    for done in (1.0, 2.0, 3.0):  # the server's own count starts again from below
        await told(done, 3.0, "step")
    assert sent == [(1.0, 30.0, "waiting"), (2.0, 30.0, "waiting"), (3.0, 5.0, "step"), (4.0, 5.0, "step"),
                    (5.0, 5.0, "step")]
