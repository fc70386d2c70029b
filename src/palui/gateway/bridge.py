"""``palui gateway --client NAME``: a thin stdio bridge to the running service's ``/mcp`` (spec §8.6).

For MCP clients that start a command rather than open a URL. One service per ``PALUI_HOME`` runs the
connectors, so the bridge runs none: it finds the service through its discovery file (``serve.json``,
:func:`palui.discovery.find_service`), connects to ``/mcp`` with the client's own token
(``PALUI_GATEWAY_TOKEN``: the service's token never opens ``/mcp``), and relays ``tools/list`` and
``tools/call`` (with progress notifications), ``resources/list|read`` and ``prompts/list|get`` one way and
``tools/list_changed`` the other. With no service running it still answers ``initialize``, and every request with
an error saying how to start it, at once.

**It reconnects.** It looks for the service again at each request while it has no connection, so a bridge
started before ``palui serve`` finds it once it runs. When the connection breaks (the service stopped or
restarted), a request that never reached the service (its session unknown to a new service, a refused
connection) is sent again on a new connection, once; a call cut off while the service had it fails, saying it may
have run. So a restart costs at most that one call.

The stdio side speaks the initialize handshake only (up to 2025-11-25): a ``server/discover`` is answered
``-32022`` naming those versions, so a 2026-07-28 client falls back, as over HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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
#: Seconds to connect to the service and finish the handshake: a service that is down refuses at once.
CONNECT_SECONDS = 10.0
#: What a call cut off by the service going away is told.
CUT_OFF = ("the connection to the Palui service closed during this request (the service stopped or restarted): if "
           "it had the call, the call may have run; the bridge connects again at the next request (check before "
           "calling it again)")
T = TypeVar("T")


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


class Link:
    """One connection to the service's ``/mcp``, held open by a task of its own (the SDK client's task groups
    belong to the task that entered it; requests of any task go through its session).

    Args:
        url: the service's base URL.
        token: the client's token.
        on_message: the SDK client's message handler (``tools/list_changed``).
    """

    def __init__(self, url: str, token: str, on_message: Any) -> None:
        self.url = url
        self._token = token
        self._on_message = on_message
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.client: Client | None = None
        self.answered = 0  # requests the service answered (its response began): one that was not never reached it

    async def open(self) -> Client:
        """Connect and finish the handshake within :data:`CONNECT_SECONDS`. Raises what connecting raised."""
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(ready))
        try:
            self.client = await asyncio.wait_for(asyncio.shield(ready), CONNECT_SECONDS)
        except BaseException:
            await self.close()
            raise
        return self.client

    async def _hold(self, ready: asyncio.Future[Client]) -> None:
        try:
            async def answered(response: httpx2.Response) -> None:
                if response.request.method == "POST":
                    self.answered += 1

            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self._token}"},
                                      timeout=httpx2.Timeout(CONNECT_SECONDS, read=None),
                                      event_hooks={"response": [answered]})
            async with http:
                client = Client(streamable_http_client(f"{self.url}/mcp", http_client=http), mode="legacy",
                                cache=None, message_handler=self._on_message,
                                client_info=types.Implementation(name="palui-gateway-bridge", version=__version__))
                async with client:
                    ready.set_result(client)
                    await self._stop.wait()
        except BaseException as e:  # a refusal before it was ready is the opener's; a break later ends the link
            if not ready.done():
                ready.set_exception(e if isinstance(e, Exception) else ConnectionError(str(e)))
        finally:
            self.client = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done()

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None and not self._task.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 5)


def _unreached(e: BaseException, answered: bool) -> bool:
    """Whether a failed request never reached a service that would run it: its session is unknown (a new service
    after a restart), or the connection closed before the service ``answered`` anything (it was down)."""
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    if isinstance(e, MCPError) and ("session not found" in (e.error.message or "").lower() or e.error.code == 404):
        return True
    closed = isinstance(e, MCPError) and e.error.code == types.CONNECTION_CLOSED
    return (closed or isinstance(e, (httpx2.ConnectError, ConnectionRefusedError))) and not answered


class Bridge:
    """Relays one stdio session to ``/mcp`` of the running service.

    Args:
        find: the running service's base URL (``http://127.0.0.1:8765``), None when none runs: asked again
            whenever the bridge has no connection.
        token: the client's token.
        home: the ``PALUI_HOME`` (named in the error when no service runs).
    """

    def __init__(self, find: Callable[[], str | None], token: str, home: str) -> None:
        self.find = find
        self.token = token
        self.home = home
        self.link: Link | None = None
        self.downstream: Any = None  # the stdio side's session, once a request came (list_changed goes there)
        self._connecting = asyncio.Lock()
        self.server = GatewayServer("palui", version=__version__, title="Palui gateway",
                                    on_list_tools=self._list_tools, on_call_tool=self._call_tool,
                                    on_list_resources=self._list_resources, on_read_resource=self._read_resource,
                                    on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt)

    async def run(self) -> None:
        """Serve stdin/stdout until the client closes them."""
        try:
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
        finally:
            if self.link is not None:
                await self.link.close()

    async def _up(self, ctx: Any) -> Client:
        """The connection to the service, made now if there is none (the service found again)."""
        self.downstream = ctx.session
        async with self._connecting:
            if self.link is not None and self.link.alive and self.link.client is not None:
                return self.link.client
            if self.link is not None:
                await self.link.close()
                self.link = None
            url = self.find()
            if url is None:
                raise MCPError(INTERNAL_ERROR, not_running(self.home))
            link = Link(url, self.token, self._on_message)
            try:
                client = await link.open()
            except Exception as e:  # refused (a removed client's token) or gone: this request says so
                raise MCPError(INTERNAL_ERROR, f"the Palui service at {url} refused the gateway connection: "
                                               f"{_cause(e)}") from None
            self.link = link
            return client

    async def _relay(self, ctx: Any, op: Callable[[Client], Awaitable[T]]) -> T:
        """``op`` on the service's connection; a request that never reached the service is sent again once on a
        new connection, a call cut off while the service had it fails saying so (:data:`CUT_OFF`)."""
        for _ in range(2):
            up = await self._up(ctx)
            before = self.link.answered if self.link is not None else 0
            try:
                return await op(up)
            except Exception as e:
                unreached = _unreached(e, self.link is not None and self.link.answered != before)
                closed = isinstance(e, MCPError) and e.error.code == types.CONNECTION_CLOSED
                if not unreached and not closed and self.link is not None and self.link.alive:
                    raise  # the service's own answer (a refusal, an error): passed on as it is
                await self._drop()
                if not unreached:
                    raise MCPError(INTERNAL_ERROR, CUT_OFF) from None
        raise MCPError(INTERNAL_ERROR, CUT_OFF)

    async def _drop(self) -> None:
        async with self._connecting:
            if self.link is not None:
                await self.link.close()
                self.link = None

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return await self._relay(ctx, lambda up: up.list_tools())

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        meta: Any = ctx.meta or {}
        token = meta.get("progressToken", meta.get("progress_token")) if isinstance(meta, dict) else None

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if token is not None:
                with contextlib.suppress(Exception):
                    await ctx.session.send_progress_notification(token, progress, total, message,
                                                                 related_request_id=str(ctx.request_id))

        args = dict(params.arguments or {})
        return await self._relay(ctx, lambda up: up.call_tool(params.name, args, progress_callback=progress))

    async def _list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None
                              ) -> types.ListResourcesResult:
        return await self._relay(ctx, lambda up: up.list_resources(cache_mode="bypass"))

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await self._relay(ctx, lambda up: up.read_resource(str(params.uri), cache_mode="bypass"))

    async def _list_prompts(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await self._relay(ctx, lambda up: up.list_prompts(cache_mode="bypass"))

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await self._relay(ctx, lambda up: up.get_prompt(params.name, dict(params.arguments or {})))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification) and self.downstream is not None:
            with contextlib.suppress(Exception):
                await self.downstream.send_tool_list_changed()
