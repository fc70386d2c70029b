"""How ``/mcp`` answers a request (spec §8.6): one JSON body unless the answer needs a stream, and whether the
client is still there.

- **JSON unless a stream is due.** The SDK's streamable-HTTP transport answers either every request of a session
  with an SSE stream or every one with one JSON body. A gateway request needs a stream only when the client asked
  for progress (``_meta.progressToken``) or may be asked a question during it (a trusted client that declared
  elicitation, :class:`Ask`): :func:`streaming` says which, and :class:`QuietTransport` reads that choice per
  request (a context variable set by the endpoint for the request's task), so a plain read costs one JSON body,
  not a stream's framing, events and tasks. Nothing else is sent for a JSON request: the gateway's handlers send
  progress or questions only where the client asked for the stream. (The session's own tasks, started by its
  ``initialize``, keep the SDK's default: ``initialize`` is always answered as the SDK answers it.)
- **The client gone.** :class:`Body` hands the SDK the request body it was read as, then the connection's own
  messages; it marks the request :attr:`~Body.gone` when the connection closes before the answer was sent (a
  client that timed out, was stopped, or crashed). A call waiting for the person's approval stops waiting then:
  the approval runs nothing by itself (spec §8.6).

The session manager (:class:`GatewaySessions`) makes each session's transport a :class:`QuietTransport`; both
depend on how the pinned SDK (mcp 2.3.0) builds a session's transport (``_admit_session``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
from typing import Any
from uuid import uuid4

from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Message, Receive, Scope, Send

#: Whether the request this task answers gets one JSON body (True) or an SSE stream (False, the SDK's default).
JSON_BODY: contextvars.ContextVar[bool] = contextvars.ContextVar("palui_gateway_json_body", default=False)
#: Where a request's :class:`Body` is kept in its ASGI scope (``scope["state"]``), for the handler to read.
BODY_KEY = "palui_gateway_body"
#: The most a request body may hold (the SDK's own limit, 4 MiB): a longer one is answered 413 by the SDK.
MAX_BODY = 4 * 1024 * 1024


def streaming(message: Any, may_ask: bool) -> bool:
    """Whether the JSON-RPC ``message`` (a request's parsed body) needs an SSE answer: a ``tools/call`` that asked
    for progress, or one whose session may be asked a question during it (``may_ask``). A batch, a notification,
    or anything else is answered as the SDK answers it by default."""
    if not isinstance(message, dict) or "method" not in message or message["method"] == "initialize":
        # not one request (a batch, a response): the SDK's own way; and ``initialize`` starts the session's tasks,
        # which inherit the request's context: they must see the SDK's default (streams), never this choice
        return True
    if message.get("method") != "tools/call":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return may_ask or (isinstance(meta, dict) and meta.get("progressToken") is not None)


class QuietTransport(StreamableHTTPServerTransport):
    """The SDK's transport answering each request as :data:`JSON_BODY` says (read in the request's own task when
    the transport decides how to answer it)."""

    @property
    def is_json_response_enabled(self) -> bool:
        return JSON_BODY.get()

    @is_json_response_enabled.setter
    def is_json_response_enabled(self, value: bool) -> None:
        """The SDK's constructor sets it: the choice is made per request, not per session."""


class GatewaySessions(StreamableHTTPSessionManager):
    """The SDK's session manager, making :class:`QuietTransport` sessions."""

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        transport = QuietTransport(mcp_session_id=uuid4().hex, event_store=self.event_store,
                                   security_settings=self.security_settings, retry_interval=self.retry_interval,
                                   idle_timeout=self.session_idle_timeout)
        session_id = transport.mcp_session_id
        assert session_id is not None
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport

    def transport(self, key: str) -> StreamableHTTPServerTransport | None:
        """The live transport of session ``key``, None when the SDK holds none."""
        return self._server_instances.get(key)

    def held(self) -> set[str]:
        """The session ids the SDK holds now."""
        return set(self._server_instances)


class Body:
    """One request's body, read whole before the SDK sees it, and the connection's later messages.

    Args:
        receive: the connection's ``receive``.
    """

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self._body: bytes | None = None
        self.message: Any = None
        self.gone = False  # the connection closed before the answer was sent
        self.answered = False
        self._watch: asyncio.Task[None] | None = None

    async def read(self) -> bool:
        """Read the body (at most :data:`MAX_BODY` bytes) and parse it. False when the connection closed first or
        the body is too long (the SDK then answers it, as it would have)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            m = await self._receive()
            if m["type"] == "http.disconnect":
                self.gone = True
                return False
            chunk = m.get("body", b"")
            size += len(chunk)
            chunks.append(chunk)
            if size > MAX_BODY:
                self._body = b"".join(chunks)
                return False
            if not m.get("more_body"):
                break
        self._body = b"".join(chunks)
        with contextlib.suppress(ValueError):
            self.message = json.loads(self._body)
        return True

    def watch(self) -> None:
        """Watch the connection while the request is answered: its close before the answer marks :attr:`gone`."""
        self._watch = asyncio.get_running_loop().create_task(self._wait_for_close())

    async def _wait_for_close(self) -> None:
        with contextlib.suppress(Exception):
            while not self.answered:
                if (await self._receive())["type"] == "http.disconnect":
                    self.gone = self.gone or not self.answered
                    return

    def stop(self) -> None:
        """The request was answered: stop watching."""
        self.answered = True
        if self._watch is not None:
            self._watch.cancel()

    async def receive(self) -> Message:
        """What the SDK reads: the body read here, then the connection's messages (a stream's disconnect)."""
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        m = await self._receive()
        if m["type"] == "http.disconnect" and not self.answered:
            self.gone = True
        return m

    def sending(self, send: Send) -> Send:
        """``send`` that notes when the answer's last part went."""

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.answered = True
            await send(message)

        return wrapped


def body_of(scope: Scope | None) -> Body | None:
    """The :class:`Body` the endpoint kept in a request's scope, if any."""
    state = scope.get("state") if scope is not None else None
    return state.get(BODY_KEY) if isinstance(state, dict) else None
