"""``/mcp`` on ``palui serve``: the gateway as a streamable-HTTP MCP server (spec §8.6, docs/gateway.md).

The official SDK's low-level :class:`~mcp.server.lowlevel.Server` answers the protocol (initialize, ping,
``tools/*``, ``resources/list|read``, ``prompts/list|get``); its session manager holds the sessions
(:class:`~palui.gateway.transport.GatewaySessions`: one JSON body per request unless progress or a question is
due) and runs in the service's lifespan (:meth:`GatewayEndpoint.run`). The app's guard has checked the ``Host``
and ``Origin`` headers and the client's token before a request gets here, and put the client's name in the
request's state (:data:`CLIENT_KEY`).

- **Sessions.** An MCP session (its ``Mcp-Session-Id``) belongs to the client whose ``initialize`` opened it; it
  is a gateway session of the service (:meth:`GatewayPart.open_session`) from its first request that
  needs one. A client holds at most ``gateway.sessions_per_client`` sessions: opening one more ends its least
  recently used one. A session ends by the client's ``DELETE``, when the SDK drops it (idle 30 minutes), when the
  person ends it (``palui gateway sessions --end``), clears or removes the client (in any process), at the
  service's shutdown, or at start for sessions a previous process left; from then on its id answers ``404
  Session not found``, whatever the request.
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
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from palui import __version__
from palui.errors import PaluiError
from palui.gateway.calls import Calls
from palui.gateway.tools import GatewayServer
from palui.gateway.transport import BODY_KEY, JSON_BODY, Body, GatewaySessions, streaming

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from palui.service.api import Service

log = logging.getLogger(__name__)

#: Where the app's guard puts the calling client's name: ``scope["state"][CLIENT_KEY]``.
CLIENT_KEY = "palui_gateway_client"
#: Seconds between two reads of the catalog version (``tools/list_changed``) and of the sessions' state.
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
#: Why a client's least recently used session ends when it opens one more than it may hold.
TOO_MANY = "the client opened more sessions than gateway.sessions_per_client"


@dataclass
class Held:
    """One MCP session as the endpoint knows it: its ``client``, the service's session (``sid``, None until a
    request needed one), the SDK's session (for notifications), when it was last ``used`` (epoch seconds) and
    whether the client may be asked a server's questions (``may_ask``: trusted and declared elicitation)."""

    client: str
    used: float
    sid: str | None = None
    session: ServerSession | None = None
    may_ask: bool = False
    stored_use: float = 0.0


class GatewayEndpoint:
    """The ASGI app of ``/mcp`` and its lifespan.

    Args:
        svc: the service (its gateway part, :class:`palui.service.gateway.GatewayPart`).
    """

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.calls = Calls(svc, self._session)
        c = self.calls
        self.server = GatewayServer("palui", version=__version__, title="Palui gateway", instructions=INSTRUCTIONS,
                                    on_list_tools=c.list_tools, on_call_tool=c.call_tool,
                                    on_list_resources=c.list_resources, on_read_resource=c.read_resource,
                                    on_list_prompts=c.list_prompts, on_get_prompt=c.get_prompt)
        self.manager = GatewaySessions(self.server)
        self._held: dict[str, Held] = {}  # Mcp-Session-Id -> the session as the endpoint knows it

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The session manager and the watcher, for the service's lifespan; sessions left open by an earlier
        process are ended first, this process's at the end."""
        self.svc.gateway.end_open_sessions("the service restarted")
        watcher = asyncio.create_task(self._watch())
        try:
            async with self.manager.run():
                yield
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for held in list(self._held.values()):
                if held.sid is not None:
                    self.svc.gateway.end_session(held.sid, "the service stopped")
            self._held.clear()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        version = headers.get(VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            return await self._refuse_version(scope, receive, send, version)
        client = scope.get("state", {}).get(CLIENT_KEY)
        key = headers.get(SESSION_HEADER)
        held = self._held.get(key) if key is not None else None
        if key is not None and (held is None or held.client != client or not await self._alive(key, held)):
            # Another client's session, one this process never made, or one that ended, is answered as unknown: a
            # session id is not a credential, the token is, and the two must belong together.
            error = {"code": SESSION_NOT_FOUND, "message": "Session not found"}
            return await JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=404)(
                scope, receive, send)
        if held is not None:
            held.used = time.time()
        body: Body | None = None
        asks = False  # an initialize that declares elicitation
        quiet = JSON_BODY.set(False)
        try:
            if scope["method"] == "POST":
                body = Body(receive)
                if await body.read():
                    json_body = not streaming(body.message, held.may_ask if held is not None else False)
                    JSON_BODY.set(json_body)
                    if json_body and isinstance(body.message, dict) and body.message.get("method") == "tools/call":
                        body.watch()  # no stream listens for the client's leaving: the body does
                    if key is None and client and isinstance(body.message, dict) and \
                            body.message.get("method") == "initialize":
                        await self._make_room(client)
                        asks = self.calls.may_ask(client, _declared(body.message))
                scope.setdefault("state", {})[BODY_KEY] = body
                receive, send = body.receive, body.sending(send)
            if key is None and client:
                send = self._owning(send, client, asks)
            if scope["method"] == "DELETE" and key is not None and held is not None:
                self._forget(key, "the client ended the session")
            await self.manager.handle_request(scope, receive, send)
        finally:
            JSON_BODY.reset(quiet)
            if body is not None:
                body.stop()

    def _owning(self, send: Send, client: str, may_ask: bool) -> Send:
        """``send`` that records ``client`` as the owner of the session an ``initialize`` answer opens (and whether
        a server's questions may go to it)."""

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                for k, v in message.get("headers", []):
                    if k.decode("latin-1").lower() == SESSION_HEADER:
                        self._held.setdefault(v.decode("latin-1"), Held(client, time.time(), may_ask=may_ask))
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

    # -- sessions ------------------------------------------------------------------------------------

    async def _alive(self, key: str, held: Held) -> bool:
        """Whether the session is still open: a service session ended by the person or another process (a clear,
        a removal, ``sessions --end``) ends the MCP session too."""
        if held.sid is None or self.svc.gateway.session_open_now(held.sid):
            return True
        await self._drop(key)
        return False

    async def _drop(self, key: str) -> None:
        """Forget the session and end its SDK transport, so its id answers 404 everywhere."""
        self._held.pop(key, None)
        transport = self.manager.transport(key)
        if transport is not None and not transport.is_terminated:
            with contextlib.suppress(Exception):
                await transport.terminate()

    def _forget(self, key: str, reason: str) -> None:
        held = self._held.pop(key, None)
        if held is not None and held.sid is not None:
            self.svc.gateway.end_session(held.sid, reason)

    async def _make_room(self, client: str) -> None:
        """Before ``client`` opens a session: end its least recently used ones beyond
        ``gateway.sessions_per_client`` (one more is about to open)."""
        bound = self.svc.settings.gateway.sessions_per_client
        mine = sorted(((h.used, k) for k, h in self._held.items() if h.client == client))
        for _, key in mine[:max(0, len(mine) - bound + 1)]:
            self._forget(key, TOO_MANY)
            await self._drop(key)

    def _session(self, ctx: ServerRequestContext[Any, Any]) -> tuple[str, bool]:
        """The service's gateway session of this request's MCP session, opened on first use, and whether its
        client may be asked a server's questions."""
        request = ctx.request
        client = request.scope.get("state", {}).get(CLIENT_KEY) if request is not None else None
        key = request.headers.get(SESSION_HEADER) if request is not None else None
        held = self._held.get(key) if key is not None else None
        if not client or held is None or held.client != client:
            raise PermissionError("no gateway client or session on this request")
        if held.sid is None:
            try:
                held.sid = self.svc.gateway.open_session(client)
            except PaluiError as e:  # the emergency brake pauses the gateway: the client is told why, in words
                raise MCPError(types.INTERNAL_ERROR, str(e)) from None
            held.session = ctx.session
        return held.sid, held.may_ask

    async def _watch(self) -> None:
        """Every :data:`POLL_SECONDS`: sessions the SDK dropped end, the sessions' last use is stored, and a
        catalog change is told to every open session."""
        seen = self.svc.gateway.catalog_version()
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                now = self.svc.gateway.catalog_version()
                self._end_dropped()
                self._store_use()
            except Exception as e:  # a locked database now is read again at the next poll
                log.debug("gateway: the poll did not finish: %r", e)
                continue
            if now == seen:
                continue
            seen = now
            for held in list(self._held.values()):
                if held.session is not None:
                    with contextlib.suppress(Exception):  # a session that went away is dropped by its DELETE
                        await held.session.send_tool_list_changed()

    def _end_dropped(self) -> None:
        """End the sessions the SDK dropped without a ``DELETE`` (its idle timeout, 30 minutes, or a crashed
        session task)."""
        alive = self.manager.held()
        for key in [k for k in self._held if k not in alive]:
            self._forget(key, "the session was idle too long")

    def _store_use(self) -> None:
        used = {h.sid: h.used for h in self._held.values() if h.sid is not None and h.used != h.stored_use}
        if used:
            self.svc.gateway.sessions_used(used)
            for h in self._held.values():
                h.stored_use = h.used


def _declared(initialize: dict[str, Any]) -> bool:
    """Whether an ``initialize`` request's client declares elicitation (form)."""
    params = initialize.get("params")
    caps = params.get("capabilities") if isinstance(params, dict) else None
    elicitation = caps.get("elicitation") if isinstance(caps, dict) else None
    return isinstance(elicitation, dict) and (not elicitation or "form" in elicitation)
