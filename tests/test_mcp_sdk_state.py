"""Palui's raw ``tools/list`` still feeds the SDK session's per-tool state (found by the MCP
conformance suite's http-custom-headers scenario, docs/mcp-conformance.md).

Against a real SDK server (tests/support/mcp_param_headers.py, 2026-07-28 over streamable
HTTP): the first call of a tool whose argument is annotated ``x-mcp-header`` carries its
``Mcp-Param-*`` header, and the session never fetches a listing of its own (one Palui would
not compare with its definition hashes), neither for the headers nor for the output schema.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from palui.connectors.mcp import MCPConnector
from palui.connectors.mcp.config import ServerConfig

pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parent / "support" / "mcp_param_headers.py"


@pytest.fixture
def param_server():
    p = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    seen: list[dict] = []
    try:
        port = int(p.stdout.readline().split()[1])

        def read() -> None:
            for line in p.stdout:
                seen.append(json.loads(line))

        threading.Thread(target=read, daemon=True).start()
        yield f"http://127.0.0.1:{port}/mcp", seen
    finally:
        p.terminate()
        p.wait(10)


async def test_first_call_carries_param_headers_and_no_hidden_listing(svc, param_server):
    url, seen = param_server
    conn = MCPConnector(svc._hub.env, "mcp-hdr", "hdr", ServerConfig("http", url=url))
    try:
        await conn.start()
        assert conn._session.protocol_version == "2026-07-28"
        for text in ("one", "two"):
            r = await conn.call_tool("route", {"region": "eu-west 1", "text": text})
            assert not r.is_error, r.text
            assert json.loads(r.text) == {"region": "eu-west 1", "text": text}
    finally:
        await conn.close()
    for _ in range(100):  # the server prints each request before answering it; the reader may lag
        if sum(m["method"] == "tools/call" for m in seen) >= 2:
            break
        await asyncio.sleep(0.02)
    calls = [m for m in seen if m["method"] == "tools/call"]
    # Without the fix: three calls (the first rejected with HEADER_MISMATCH, sent without the
    # header) and a second tools/list made by the SDK behind Palui's back.
    assert [c["mcp_headers"].get("mcp-param-region") for c in calls] == ["eu-west 1", "eu-west 1"], seen
    assert [m["method"] for m in seen].count("tools/list") == 1, seen
