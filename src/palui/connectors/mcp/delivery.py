"""Whether a ``tools/call`` reached its server before the session was lost (spec §7.10).

A server that restarts loses its sessions. In the 2025-11-25 era the old ``Mcp-Session-Id`` is then
answered ``404 Session not found`` (the SDK's client keeps sending it: an open bug of the SDK); in both
eras a server killed mid-call closes the call's connection. What Palui may do next depends on one fact:
was the request delivered?

- **Not delivered**: the server answered 404 to the session id (it refused the request before looking at
  it), or the TCP connection of the call's POST was refused (nobody listened). Sending it again cannot
  run it twice.
- **Maybe delivered**: the connection closed after the request went out. The server may have run it.

:class:`DeliveryWatch` wraps the HTTP client's transport and records, for the call whose context is
current (:data:`CURRENT`: the SDK runs each request's POST in the context of the task that sent it), a
connection refused before anything was sent. :func:`lost_session` reads the outcome of one call.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Literal

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError

from palui.connectors.mcp.oauth.step_up import StepUp

#: The delivery record of the ``tools/call`` being sent in this context (None outside a call).
CURRENT: contextvars.ContextVar[CallDelivery | None] = contextvars.ContextVar("palui_mcp_delivery", default=None)

Lost = Literal["before", "during"]


@dataclass
class CallDelivery:
    """What the transport saw of one call's POST: ``refused`` when its connection was refused (the
    request never left this machine); ``step_up`` when the server refused it for a scope (spec §7.11)."""

    refused: bool = False
    step_up: StepUp | None = None


class DeliveryWatch(httpx2.AsyncBaseTransport):
    """A transport around ``inner`` that marks the current call's :class:`CallDelivery` ``refused`` when
    the connection of a POST cannot be opened (``httpx2.ConnectError``: nothing was sent)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            return await self.inner.handle_async_request(request)
        except httpx2.ConnectError:
            record = CURRENT.get()
            if record is not None and request.method == "POST":
                record.refused = True
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


def session_refused(e: MCPError) -> bool:
    """The server does not know the call's session: the SDK's reading of ``404`` to a request that carried
    an ``Mcp-Session-Id`` (``Session not found`` from an SDK server's body, ``Session terminated`` when the
    404 had no JSON-RPC body)."""
    text = (e.message or "").lower()
    return e.code == types.INVALID_REQUEST and ("session not found" in text or "session terminated" in text)


def lost_session(e: BaseException, record: CallDelivery, session_lost: bool) -> Lost | None:
    """How a call that raised ``e`` lost its session: ``before`` (not delivered: sending it again cannot run
    it twice), ``during`` (the connection closed after it went out: it may have run), or None (another
    error). ``session_lost``: the session saw a 404 to its session id."""
    if not isinstance(e, MCPError):
        return None
    if session_refused(e) and session_lost:
        return "before"
    if e.code == types.CONNECTION_CLOSED:
        return "before" if record.refused else "during"
    return None
