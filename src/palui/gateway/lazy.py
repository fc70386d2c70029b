"""``/mcp`` built at its first request: ``palui serve`` starts without the MCP SDK's server side.

Importing the SDK's server side (its session manager, the protocol types, pydantic models) was a third of
``palui serve``'s start CPU and memory, whether any MCP client ever connected or not
(docs/decisions/0190-nothing-before-it-is-needed.md). :class:`LazyGateway` is the route of ``/mcp``: at the
service's start it only ends the gateway sessions an earlier process left open; the first request to ``/mcp``
imports :mod:`palui.gateway.http` (in a worker thread, so the event loop keeps answering), builds its
:class:`~palui.gateway.http.GatewayEndpoint` and runs that endpoint's session manager in a task of its own
(the SDK's task group is entered and left in that one task) until the service stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from palui.gateway.http import GatewayEndpoint
    from palui.service.api import Service


class LazyGateway:
    """The ASGI app of ``/mcp``, building the real one (:class:`~palui.gateway.http.GatewayEndpoint`) when first
    asked, and its lifespan (:meth:`run`).

    Args:
        svc: the service (its gateway part).
    """

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.endpoint: GatewayEndpoint | None = None
        self._lock: asyncio.Lock | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """For the service's lifespan: sessions left open by an earlier process are ended now; the endpoint, if
        a request built it, stops at the end (its sessions ended, as :meth:`GatewayEndpoint.run` ends them)."""
        self.svc.gateway.end_open_sessions("the service restarted")
        try:
            yield
        finally:
            if self._task is not None and self._stop is not None:
                self._stop.set()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoint or await self._started()
        await endpoint(scope, receive, send)

    async def _started(self) -> GatewayEndpoint:
        """The endpoint, built and running (once, whichever request comes first)."""
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if self.endpoint is not None:
                return self.endpoint
            http = await asyncio.to_thread(importlib.import_module, "palui.gateway.http")
            endpoint: GatewayEndpoint = http.GatewayEndpoint(self.svc)
            ready, self._stop = asyncio.Event(), asyncio.Event()

            async def serve(stop: asyncio.Event) -> None:
                async with endpoint.run():
                    ready.set()
                    await stop.wait()

            self._task = task = asyncio.create_task(serve(self._stop))
            waiting = asyncio.create_task(ready.wait())
            await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
            if not ready.is_set():  # the manager failed to start: say why, and try again at the next request
                waiting.cancel()
                self._task = None
                task.result()
            self.endpoint = endpoint
            return endpoint
