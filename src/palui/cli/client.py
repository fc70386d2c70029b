"""The CLI's client for a live service (spec §8: commands that run or resume turns go through it).

Streams NDJSON events from the service's JSON API and hands them to the same
renderers as the in-process path, so output does not depend on where the turn ran.

What the service answers is one of its result shapes (:mod:`palui.results`), sent as JSON: a turn's
stream gives :class:`~palui.results.TurnResult` and its events; ``get`` and ``post`` give the body as
it came (``Any``), and the caller names the shape it asked for (``a: Approval = client.get(…)``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import httpx

from palui.errors import ApprovalError, NotFound, PaluiError, UsageError
from palui.server.discovery import ServiceInfo
from palui.types import JSON

if TYPE_CHECKING:
    from palui.results import StreamEvent, TurnEvent, TurnResult

#: Receives a turn's events as they arrive (the service's event shapes).
EventSink = Callable[["TurnEvent"], None]
#: Receives every line of a turn's stream but its result: the line saying the turn is stored, then its events.
StreamSink = Callable[["StreamEvent"], None]


#: The longest id or name the command line sends in a URL path (ids are ~34 characters, names at most 64).
MAX_SEGMENT = 512


def segment(value: str, what: str) -> str:
    """``value`` (an id the person typed) as one URL path segment: percent-encoded, so ``/``, ``..``
    or ``?`` in it cannot reach another route, and the service (which matches routes on the raw path)
    sees it exactly as typed; ``.`` and ``..`` are encoded too (a client would resolve them as dot
    segments). An empty one is a usage error naming ``what``; one over :data:`MAX_SEGMENT` characters is no
    id or name Palui makes (it would not fit a request line), refused as not found before any request."""
    from urllib.parse import quote

    from palui.text.display import named

    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{what} is needed")
    if len(value) > MAX_SEGMENT:
        raise NotFound(f"{named(value)} is not {what}: no id or name is that long")
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def raise_for(r: httpx.Response) -> None:
    """Raise the PaluiError a service's error answer stands for (404 NotFound, 409 ApprovalError,
    400 with ``"kind": "usage"`` UsageError, …), so an exit code does not depend on where it ran."""
    if r.status_code < 400:
        return
    kind = None
    try:
        data = r.json()
        msg, kind = data.get("error", r.text), data.get("kind")
    except (ValueError, AttributeError):
        msg = r.text
    if kind == "usage":
        raise UsageError(msg)
    if r.status_code == 404:
        raise NotFound(msg)
    if r.status_code == 409:
        raise ApprovalError(msg)
    if r.status_code == 400:
        raise UsageError(msg) if "usage" in msg.lower() else PaluiError(msg)
    raise PaluiError(f"the service answered {r.status_code}: {msg}")


def _result_of(line: JSON) -> TurnResult:
    """The turn's result from the stream's last line (a :class:`~palui.results.ResultLine`): the line
    without its ``type``, as the service built it."""
    return cast("TurnResult", {k: v for k, v in line.items() if k != "type"})


class ServiceGone(PaluiError):
    """The live service went away during a request; ``turn`` names the turn it had stored, if it said so."""

    def __init__(self, message: str, turn: str | None = None) -> None:
        super().__init__(message)
        self.turn = turn


class ServiceClient:
    """Talks to one live service. Methods raise the same PaluiError subclasses as the service API."""

    def __init__(self, info: ServiceInfo, timeout: float | None = None) -> None:
        self.info = info
        self.http = httpx.Client(base_url=info.url, headers={"Authorization": f"Bearer {info.token}"},
                                 timeout=httpx.Timeout(timeout, connect=5.0))

    def _raise(self, r: httpx.Response) -> None:
        raise_for(r)

    def get(self, path: str, **params: Any) -> Any:
        """GET a route that answers a JSON object (``params`` with a None value are left out): the
        route's result shape, as sent."""
        try:
            r = self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        except httpx.TransportError as e:
            raise ServiceGone(f"cannot reach the service at {self.info.url}: {type(e).__name__}") from None
        self._raise(r)
        return r.json()

    def post(self, path: str, data: JSON | None = None) -> Any:
        """POST ``data`` to a route that answers a JSON object: the route's result shape, as sent."""
        try:
            r = self.http.post(path, json=data or {})
        except httpx.TransportError as e:
            raise ServiceGone(f"cannot reach the service at {self.info.url}: {type(e).__name__}") from None
        self._raise(r)
        answer: JSON = r.json()
        return answer

    def stream(self, path: str, data: JSON, on_event: EventSink | None) -> TurnResult:
        """POST with ``stream: true``; call ``on_event`` per event; return the final result.

        The service's first line says the turn is stored (``{"type": "turn"}``); an error says
        the turn is kept only when that line arrived (never "kept" unless stored:
        docs/decisions/0120-a-chat-that-survives-the-service.md)."""
        result: TurnResult | None = None
        stored: str | None = None
        try:
            with self.http.stream("POST", path, json={**data, "stream": True}) as r:
                if r.status_code >= 400:
                    r.read()
                    self._raise(r)
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    ev = json.loads(line)  # a line of the stream (palui.results.StreamLine)
                    if ev.get("type") == "result":
                        result = _result_of(ev)
                    elif ev.get("type") == "turn":
                        stored = ev.get("turn")
                    elif on_event:
                        on_event(ev)
        except (httpx.TransportError, ValueError) as e:
            raise ServiceGone(self._gone(stored, type(e).__name__), stored) from None
        if result is None:
            raise ServiceGone(self._gone(stored, "no result"), stored)
        return result

    def _gone(self, stored: str | None, why: str) -> str:
        if stored:
            return (f"the service at {self.info.url} went away while the turn ran ({why}); the turn {stored} is "
                    "kept and goes on when a service or palui chat starts: see palui conversations show")
        return (f"the service at {self.info.url} went away before it said the message was stored ({why}); "
                "see palui conversations list before sending it again")

    def run(self, message: str, *, conversation: str | None, model: str | None,
            on_event: EventSink | None, channel: str = "cli") -> TurnResult:
        return self.stream("/api/turns", {"message": message, "conversation": conversation, "model": model,
                                          "channel": channel}, on_event)

    def answer(self, approval_id: str, approve: bool, on_event: EventSink | None,
               reason: str | None = None, *, always: dict[str, str] | None = None, confirm: bool = False,
               stop: bool = False) -> TurnResult:
        body: JSON = {"via": "cli", **({"reason": reason} if reason else {}),
                      **({"always": {"widen": always, "confirm": confirm}} if always is not None else {}),
                      **({"stop": True} if stop else {})}
        aid = segment(approval_id, "an approval id (see: palui approvals list)")
        return self.stream(f"/api/approvals/{aid}/{'approve' if approve else 'deny'}", body, on_event)

    def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None,
                           on_event: EventSink | None) -> TurnResult:
        """Answer a server's question through the service; a turn it paused goes on there (streamed)."""
        eid = segment(elicitation_id, "a question id (see: palui elicitations list)")
        return self.stream(f"/api/elicitations/{eid}/answer",
                           {"action": action, "content": content, "via": "cli"}, on_event)

    def close(self) -> None:
        self.http.close()


class AsyncServiceClient:
    """The same service API for an event loop (``palui chat``, which reads input while a turn runs).
    Methods raise the PaluiError subclasses of the service, and :class:`ServiceGone` when the
    service cannot be reached or goes away mid-request."""

    def __init__(self, info: ServiceInfo) -> None:
        self.info = info
        self.http = httpx.AsyncClient(base_url=info.url, headers={"Authorization": f"Bearer {info.token}"},
                                      timeout=httpx.Timeout(None, connect=5.0))

    def _gone(self, e: Exception, stored: str | None = None) -> ServiceGone:
        what = f"the turn {stored} is kept and goes on when a service or palui chat takes it up" if stored else \
            "it did not say it had stored anything"
        return ServiceGone(f"the service at {self.info.url} went away ({type(e).__name__}); {what}", stored)

    async def _get(self, path: str, **params: Any) -> Any:
        try:
            r = await self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        except httpx.TransportError as e:
            raise self._gone(e) from None
        raise_for(r)
        return r.json()

    async def get(self, path: str, **params: Any) -> Any:
        """GET a route that answers a JSON object (``params`` with a None value are left out): the route's
        result shape, as sent."""
        return await self._get(path, **params)

    async def get_list(self, path: str, **params: Any) -> list[Any]:
        """GET a route that answers a JSON array of objects (``/api/approvals``): the route's result shapes."""
        rows: list[Any] = await self._get(path, **params)
        return rows

    async def post(self, path: str, data: JSON | None = None) -> Any:
        """POST ``data`` to a route that answers a JSON object: the route's result shape, as sent."""
        try:
            r = await self.http.post(path, json=data or {})
        except httpx.TransportError as e:
            raise self._gone(e) from None
        raise_for(r)
        answer: JSON = r.json()
        return answer

    async def stream(self, method: str, path: str, data: JSON | None, on_event: StreamSink | None) -> TurnResult:
        """An NDJSON request: each line to ``on_event`` (the ``turn`` line too), the final
        ``{"type": "result"}`` returned as the turn's result."""
        stored: str | None = None
        result: TurnResult | None = None
        try:
            async with self.http.stream(method, path, json=data) as r:
                if r.status_code >= 400:
                    await r.aread()
                    raise_for(r)
                async for line in r.aiter_lines():
                    if not line.strip():
                        continue
                    ev = json.loads(line)  # a line of the stream (palui.results.StreamLine)
                    if ev.get("type") == "result":
                        result = _result_of(ev)
                        continue
                    if ev.get("type") == "turn":
                        stored = ev.get("turn")
                    if on_event:
                        on_event(ev)
        except (httpx.TransportError, ValueError) as e:
            raise self._gone(e, stored) from None
        if result is None:
            raise self._gone(EOFError("no result"), stored)
        return result

    async def close(self) -> None:
        await self.http.aclose()
