"""``/mcp`` on ``palui serve``: the gateway as a streamable-HTTP MCP server (spec §8.6, docs/gateway.md).

The official SDK's low-level :class:`~mcp.server.lowlevel.Server` answers the protocol (initialize, ping,
``tools/list``, ``tools/call``); its :class:`~mcp.server.streamable_http_manager.StreamableHTTPSessionManager`
holds the sessions (stateful, SSE responses) and runs in the service's lifespan (:meth:`GatewayEndpoint.run`).
The app's guard has checked the ``Host`` and ``Origin`` headers and the client's token before a request
gets here, and put the client's name in the request's state (:data:`CLIENT_KEY`).

- **Sessions.** An MCP session (its ``Mcp-Session-Id``) is a gateway session of the service
  (:meth:`GatewayPart.open_session`): opened at its first ``tools/list`` or ``tools/call``, ended
  by the client's ``DELETE``, when the SDK drops it (idle 30 minutes), by the service's shutdown, or at
  start for sessions a previous process left.
- **Protocol versions.** Up to 2025-11-25 (the initialize handshake). A request of the 2026-07-28 era is
  answered with ``-32022`` naming the handshake versions, so a client of that era falls back to
  ``initialize``: the spec defines a gateway session only for the handshake era.
- **``tools/list_changed``.** The catalog version (a switch, class, review flag or connector changed, in
  any process) is read every :data:`POLL_SECONDS`; when it moved, every open session is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from palui import __version__
from palui.errors import PaluiError
from palui.gateway.tools import GatewayServer, as_call_result, as_mcp_tool

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from palui.service.api import Service

log = logging.getLogger(__name__)

#: Where the app's guard puts the calling client's name: ``scope["state"][CLIENT_KEY]``.
CLIENT_KEY = "palui_gateway_client"
#: Seconds between two reads of the catalog version (``tools/list_changed``).
POLL_SECONDS = 1.0
SESSION_HEADER = "mcp-session-id"
#: The JSON-RPC error the SDK answers an unknown session with (and so does the gateway for another client's).
SESSION_NOT_FOUND = -32001
VERSION_HEADER = "mcp-protocol-version"
#: Why a 2026-07-28 request is refused (the client falls back to the initialize handshake).
MODERN_REFUSED = ("Palui's gateway speaks the MCP versions of the initialize handshake (up to 2025-11-25): "
                  "connect with one of those")
INSTRUCTIONS = ("Tools governed by Palui: some calls wait for the person's approval; an error naming an approval "
                "means: call again later.")


class GatewayEndpoint:
    """The ASGI app of ``/mcp`` and its lifespan.

    Args:
        svc: the service (its gateway part, :class:`palui.service.gateway.GatewayPart`).
    """

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.server = GatewayServer("palui", version=__version__, title="Palui gateway",
                                    instructions=INSTRUCTIONS, on_list_tools=self._list_tools,
                                    on_call_tool=self._call_tool)
        self.manager = StreamableHTTPSessionManager(self.server)
        # Mcp-Session-Id -> (the service's gateway session, the SDK's session for notifications)
        self._sessions: dict[str, tuple[str, ServerSession]] = {}
        # Mcp-Session-Id -> the client whose initialize made it: only that client's token may use it
        self._owners: dict[str, str] = {}

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The session manager and the ``list_changed`` watcher, for the service's lifespan; sessions left
        open by an earlier process are ended first, this process's at the end."""
        self.svc.gateway.end_open_sessions("the service restarted")
        watcher = asyncio.create_task(self._watch_catalog())
        try:
            async with self.manager.run():
                yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for sid, _ in list(self._sessions.values()):
                self.svc.gateway.end_session(sid, "the service stopped")
            self._sessions.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return await self._refuse_version(scope, receive, send, version)
        client = scope.get("state", {}).get(CLIENT_KEY)
        key = headers.get(SESSION_HEADER)
        if key is not None and (not client or self._owners.get(key) != client):
            # Another client's session (or one this process never made) is answered as unknown: a session id
            # is not a credential, the token is, and the two must belong together.
            error = {"code": SESSION_NOT_FOUND, "message": "Session not found"}
            return await JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=404)(
                scope, receive, send)
        if key is None and client:
            send = self._owning(send, client)
        if scope["method"] == "DELETE" and key in self._sessions:
            sid, _ = self._sessions.pop(key)
            self._owners.pop(key, None)
            self.svc.gateway.end_session(sid, "the client ended the session")
        await self.manager.handle_request(scope, receive, send)

    def _owning(self, send: Send, client: str) -> Send:
        """``send`` that records ``client`` as the owner of the session an ``initialize`` answer opens."""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                for k, v in message.get("headers", []):
                    if k.decode("latin-1").lower() == SESSION_HEADER:
                        self._owners.setdefault(v.decode("latin-1"), client)
            await send(message)

        return sending

    async def _refuse_version(self, scope: Scope, receive: Receive, send: Send, version: str) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            rid = json.loads(body).get("id") if body else None
        except (ValueError, AttributeError):
            rid = None
        error = {"code": UNSUPPORTED_PROTOCOL_VERSION, "message": MODERN_REFUSED,
                 "data": {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version}}
        await JSONResponse({"jsonrpc": "2.0", "id": rid, "error": error}, status_code=400)(scope, receive, send)

    # -- the protocol's handlers -------------------------------------------------------------------

    def _session(self, ctx: ServerRequestContext[Any, Any]) -> str:
        """The service's gateway session of this request's MCP session, opened on first use."""
        request = ctx.request
        client = request.scope.get("state", {}).get(CLIENT_KEY) if request is not None else None
        key = request.headers.get(SESSION_HEADER) if request is not None else None
        if not client or not key:
            raise PermissionError("no gateway client or session on this request")
        known = self._sessions.get(key)
        if known is None:
            try:
                known = (self.svc.gateway.open_session(client), ctx.session)
            except PaluiError as e:  # the emergency brake pauses the gateway: the client is told why, in words
                raise MCPError(types.INTERNAL_ERROR, str(e)) from None
            self._sessions[key] = known
        return known[0]

    async def _list_tools(self, ctx: ServerRequestContext[Any, Any],
                          params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[as_mcp_tool(t) for t in self.svc.gateway.tools(self._session(ctx))])

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any],
                         params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            session = self._session(ctx)
        except MCPError as e:  # no session opens (the brake): the call's answer says why, as a refused call's does
            return as_call_result({"text": f"Error: {e.error.message}", "is_error": True})
        meta: Any = ctx.meta or {}
        token = meta.get("progressToken", meta.get("progress_token")) if isinstance(meta, dict) else None
        progress = None
        if token is not None:
            async def progress(done: float, total: float | None, message: str) -> None:
                with contextlib.suppress(Exception):  # a client gone mid-wait must not break the call
                    await ctx.session.send_progress_notification(token, done, total, message,
                                                                 related_request_id=str(ctx.request_id))
        # the arguments as the client sent them: the governed call checks them (spec §3.3), not this front end
        args: Any = params.arguments if params.arguments is not None else {}
        result = await self.svc.gateway.call(session, params.name, args, progress)
        return as_call_result(result)

    def _end_dropped(self) -> None:
        """End the sessions the SDK dropped without a ``DELETE`` (its idle timeout, 30 minutes, or a crashed
        session task). The manager says which sessions it holds only in its own dict; read defensively, so
        an SDK that renames it ends nothing early."""
        held = getattr(self.manager, "_server_instances", None)
        if not isinstance(held, dict):
            return
        for key in [k for k in self._owners if k not in held]:
            self._owners.pop(key, None)
        for key in [k for k in self._sessions if k not in held]:
            sid, _ = self._sessions.pop(key)
            self.svc.gateway.end_session(sid, "the session was idle too long")

    async def _watch_catalog(self) -> None:
        seen = self.svc.gateway.catalog_version()
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                now = self.svc.gateway.catalog_version()
            except Exception as e:  # a locked database now is read again at the next poll
                log.debug("gateway: catalog version not read: %r", e)
                continue
            self._end_dropped()
            if now == seen:
                continue
            seen = now
            for _, session in list(self._sessions.values()):
                with contextlib.suppress(Exception):  # a session that went away is dropped by its DELETE
                    await session.send_tool_list_changed()
