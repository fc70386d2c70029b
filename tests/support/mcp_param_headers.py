"""An MCP server built on the SDK's ``MCPServer`` (streamable HTTP), for the per-tool state tests.

Usage::

    python mcp_param_headers.py    # 127.0.0.1, a free port; prints "PORT <n>" once listening

Its tool ``route`` has a ``region`` argument annotated ``x-mcp-header: Region`` and an
output schema, so a 2026-07-28 client must mirror ``region`` into ``Mcp-Param-Region``
(the SDK's server rejects a call without it with HEADER_MISMATCH) and has an output schema
to validate against. Every POST is written to stdout as one JSON line,
``{"method": ..., "mcp_headers": {lower-case name: value}}``, so a test sees what the
client sent.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import uvicorn
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, Field

try:
    from support.tcp import listen_tcp
except ImportError:  # run as a program: tests/support is first on sys.path
    from tcp import listen_tcp  # type: ignore[no-redef]

server = MCPServer("palui-param-headers", version="1.0")


class Routed(BaseModel):
    region: str
    text: str


@server.tool()
def route(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], text: str = "") -> Routed:
    """Route ``text`` to ``region``."""
    return Routed(region=region, text=text)


def recording(app):
    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        messages, body = [], b""
        while True:
            m = await receive()
            messages.append(m)
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        try:
            method = json.loads(body).get("method")
        except ValueError:
            method = None
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"] if k.lower().startswith(b"mcp-")}
        print(json.dumps({"method": method, "mcp_headers": headers}), flush=True)
        replay = iter(messages)

        async def again():
            return next(replay, None) or await receive()

        return await app(scope, again, send)

    return wrapped


def main() -> None:
    sock = listen_tcp()
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(recording(server.streamable_http_app()), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
