"""``palui gateway --client NAME``: a thin stdio bridge to the running service's ``/mcp`` (spec §8.6).

For MCP clients that start a command rather than open a URL. One service per ``PALUI_HOME`` runs the
connectors, so the bridge runs none: it finds the service through its discovery file (``serve.json``,
:func:`palui.discovery.find_service`), connects to ``/mcp`` with the client's own token
(``PALUI_GATEWAY_TOKEN``: the service's token never opens ``/mcp``), and relays ``tools/list`` and
``tools/call`` (with progress notifications) one way and ``tools/list_changed`` the other. With no
service running it still answers ``initialize``, and every request with an error saying how to start it.

The stdio side speaks the initialize handshake only (up to 2025-11-25): a ``server/discover`` is answered
``-32022`` naming those versions, so a 2026-07-28 client falls back, as over HTTP.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import INTERNAL_ERROR, ErrorData, JSONRPCError, JSONRPCRequest
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from palui import __version__
from palui.gateway.tools import GatewayServer

TOKEN_ENV = "PALUI_GATEWAY_TOKEN"


def _cause(e: BaseException) -> str:
    """What refused the connection, in words: a group of errors is unwrapped to its first one, and an HTTP
    401 says the token was not accepted (``PALUI_GATEWAY_TOKEN`` must be this client's)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    status = getattr(getattr(e, "response", None), "status_code", None)
    if status == 401:
        return f"HTTP 401: the token in {TOKEN_ENV} is not a gateway client's token (palui gateway clients list)"
    if status is not None:
        return f"HTTP {status}"
    return str(e) or type(e).__name__


def not_running(home: str) -> str:
    """What every request is told when no service runs on ``home``."""
    return (f"no Palui service is running for PALUI_HOME {home}: start it with `palui serve` (or `palui service "
            "install`); the gateway's tools are offered by the running service")


class Bridge:
    """Relays one stdio session to ``/mcp`` of the service at ``url`` (None: no service running).

    Args:
        url: the service's base URL (``http://127.0.0.1:8765``), or None.
        token: the client's token.
        home: the ``PALUI_HOME`` (named in the error when no service runs).
    """

    def __init__(self, url: str | None, token: str, home: str) -> None:
        self.url = url
        self.token = token
        self.home = home
        self.upstream: Client | None = None
        self.problem = not_running(home)  # what every request is told while there is no upstream
        self.downstream: Any = None  # the stdio side's session, once a request came (list_changed goes there)
        self.server = GatewayServer("palui", version=__version__, title="Palui gateway",
                                    on_list_tools=self._list_tools, on_call_tool=self._call_tool)

    async def run(self) -> None:
        """Serve stdin/stdout until the client closes them."""
        async with contextlib.AsyncExitStack() as stack:
            if self.url is not None:
                try:
                    self.upstream = await stack.enter_async_context(self._connect(self.url))
                except Exception as e:  # refused (a removed client's token) or gone: every request says so
                    self.problem = f"the Palui service at {self.url} refused the gateway connection: {_cause(e)}"
            async with stdio_server() as (read, write):
                inner_send, inner_read = anyio.create_memory_object_stream[Any](0)

                async def pump() -> None:
                    async with inner_send:
                        async for item in read:
                            msg = getattr(item, "message", None)
                            if isinstance(msg, JSONRPCRequest) and msg.method == "server/discover":
                                error = ErrorData(code=UNSUPPORTED_PROTOCOL_VERSION, message="use the initialize "
                                                  "handshake", data={"supported": list(HANDSHAKE_PROTOCOL_VERSIONS)})
                                await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=msg.id, error=error)))
                                continue
                            await inner_send.send(item)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(pump)
                    await self.server.run(inner_read, write, self.server.create_initialization_options())
                    tg.cancel_scope.cancel()

    @contextlib.asynccontextmanager
    async def _connect(self, url: str) -> AsyncIterator[Client]:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                  timeout=httpx2.Timeout(30.0, read=None))
        async with http:
            client = Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", cache=None,
                            message_handler=self._on_message,
                            client_info=types.Implementation(name="palui-gateway-bridge", version=__version__))
            async with client:
                yield client

    def _up(self, ctx: Any) -> Client:
        self.downstream = ctx.session
        if self.upstream is None:
            raise MCPError(INTERNAL_ERROR, self.problem)
        return self.upstream

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await self._up(ctx).list_tools()

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        up = self._up(ctx)
        meta: Any = ctx.meta or {}
        token = meta.get("progressToken", meta.get("progress_token")) if isinstance(meta, dict) else None

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if token is not None:
                with contextlib.suppress(Exception):
                    await ctx.session.send_progress_notification(token, progress, total, message,
                                                                 related_request_id=str(ctx.request_id))

        return await up.call_tool(params.name, dict(params.arguments or {}), progress_callback=progress)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self.downstream is not None:
            with contextlib.suppress(Exception):
                await self.downstream.send_tool_list_changed()
