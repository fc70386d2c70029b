#!/usr/bin/env python3
"""Adds a gateway client's token to every request, for the MCP conformance suite's server scenarios.

The suite's ``conformance server --url`` sends no ``Authorization`` header, and ``/mcp`` opens only for a
gateway client's token (spec §8.6). This proxy listens on ``127.0.0.1:LISTEN_PORT`` and forwards each
request to ``TARGET`` (``http://127.0.0.1:8765``) with ``Authorization: Bearer $PALUI_GATEWAY_TOKEN``
added, every other header (``Host`` and ``Origin`` included) unchanged, and streams the answer back (SSE
included). The service is started with ``serve.public_url`` set to the proxy's address, so the
``Host`` the suite sends through the proxy is one the service answers to, and a rebinding ``Host`` or
``Origin`` still reaches the service's own check.

Usage: ``gateway_conformance_proxy.py LISTEN_PORT TARGET`` (used by ``scripts/run_gateway_conformance.sh``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

TOKEN = os.environ["PALUI_GATEWAY_TOKEN"]
TARGET = sys.argv[2].rstrip("/")
client = httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None))


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    request = Request(scope, receive)
    headers = [(k, v) for k, v in request.headers.raw if k.lower() not in (b"authorization", b"content-length")]
    headers.append((b"authorization", f"Bearer {TOKEN}".encode()))
    body = await request.body()
    upstream = client.build_request(request.method, TARGET + request.url.path, headers=headers, content=body)
    response = await client.send(upstream, stream=True)

    async def chunks() -> AsyncIterator[bytes]:
        try:
            async for chunk in response.aiter_raw():
                yield chunk
        finally:
            await response.aclose()

    passed = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "transfer-encoding",
                                                                           "content-encoding", "connection")}
    await StreamingResponse(chunks(), status_code=response.status_code, headers=passed)(scope, receive, send)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
