"""The CLI's client for a live service (SPEC §8: commands that run or resume turns go through it).

Streams NDJSON events from the service's JSON API and hands them to the same
renderers as the in-process path, so output does not depend on where the turn ran.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from palui.errors import ApprovalError, NotFound, PaluiError, UsageError
from palui.server.discovery import ServiceInfo

EventSink = Callable[[dict[str, Any]], None]


class ServiceClient:
    """Talks to one live service. Methods raise the same PaluiError subclasses as the service API."""

    def __init__(self, info: ServiceInfo, timeout: float | None = None) -> None:
        self.info = info
        self.http = httpx.Client(base_url=info.url, headers={"Authorization": f"Bearer {info.token}"},
                                 timeout=httpx.Timeout(timeout, connect=5.0))

    def _raise(self, r: httpx.Response) -> None:
        if r.status_code < 400:
            return
        try:
            msg = r.json().get("error", r.text)
        except ValueError:
            msg = r.text
        if r.status_code == 404:
            raise NotFound(msg)
        if r.status_code == 409:
            raise ApprovalError(msg)
        if r.status_code == 400:
            raise UsageError(msg) if "usage" in msg.lower() else PaluiError(msg)
        raise PaluiError(f"the service answered {r.status_code}: {msg}")

    def get(self, path: str, **params: Any) -> Any:
        try:
            r = self.http.get(path, params={k: v for k, v in params.items() if v is not None})
        except httpx.TransportError as e:
            raise PaluiError(f"cannot reach the service at {self.info.url}: {type(e).__name__}") from None
        self._raise(r)
        return r.json()

    def post(self, path: str, data: dict[str, Any] | None = None) -> Any:
        try:
            r = self.http.post(path, json=data or {})
        except httpx.TransportError as e:
            raise PaluiError(f"cannot reach the service at {self.info.url}: {type(e).__name__}") from None
        self._raise(r)
        return r.json()

    def stream(self, path: str, data: dict[str, Any], on_event: EventSink | None) -> dict[str, Any]:
        """POST with ``stream: true``; call ``on_event`` per event; return the final result."""
        result: dict[str, Any] | None = None
        try:
            with self.http.stream("POST", path, json={**data, "stream": True}) as r:
                if r.status_code >= 400:
                    r.read()
                    self._raise(r)
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    if ev.get("type") == "result":
                        result = {k: v for k, v in ev.items() if k != "type"}
                    elif on_event:
                        on_event(ev)
        except (httpx.TransportError, ValueError) as e:
            raise PaluiError(f"the connection to the service broke while the turn ran ({type(e).__name__}); "
                             "the turn is kept: see palui inbox, palui audit or palui approvals list") from None
        if result is None:
            raise PaluiError("the service stopped before the turn's result; the turn is kept and resumes when the "
                             "service starts again: see palui inbox, palui audit")
        return result

    def run(self, message: str, *, conversation: str | None, model: str | None,
            on_event: EventSink | None) -> dict[str, Any]:
        return self.stream("/api/turns", {"message": message, "conversation": conversation, "model": model}, on_event)

    def answer(self, approval_id: str, approve: bool, on_event: EventSink | None) -> dict[str, Any]:
        return self.stream(f"/api/approvals/{approval_id}/{'approve' if approve else 'deny'}", {"via": "cli"},
                           on_event)

    def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None,
                           on_event: EventSink | None) -> dict[str, Any]:
        """Answer a server's question through the service; a turn it paused goes on there (streamed)."""
        return self.stream(f"/api/elicitations/{elicitation_id}/answer",
                           {"action": action, "content": content, "via": "cli"}, on_event)

    def close(self) -> None:
        self.http.close()
