"""What the service answers when something goes wrong that no route expected: a bug, a broken database
(spec §8.1). Never a traceback on the terminal, never the exception's text in the answer.

:class:`CatchUnexpected` wraps the app: an exception that reaches it is logged with its traceback and a
short id to ``<data dir>/logs/palui.log`` (the process's log, set up by the CLI) and answered with 500
``{"error": "…", "kind": "error", "id": "…"}`` on ``/api/…`` (a plain line elsewhere), so the person can
find the traceback by its id. A stream that already started is cut short (its client says the service went
away). :func:`no_route` answers an unknown ``/api/…`` path (404) or method (405) in the API's shape.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from palui.results import ErrorAnswer

log = logging.getLogger("palui.server")


def error_id() -> str:
    """A short id for one unexpected error (``x-`` and 10 hex digits), said in the answer and the log."""
    return f"x-{secrets.token_hex(5)}"


class CatchUnexpected:
    """ASGI middleware: any exception of the app becomes a logged 500 with an id (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            eid = error_id()
            log.exception("unexpected error %s in %s %s", eid, scope.get("method"), scope.get("path"))
            if started:
                return  # the answer is under way: end it here (the client sees the stream cut)
            await answer_500(scope, eid)(scope, receive, send)


def answer_500(scope: Scope, eid: str) -> Response:
    """The 500 answer for error ``eid``: JSON on the API, a plain line on a page."""
    text = f"an unexpected error (id {eid}): nothing more is said here; its details are in logs/palui.log"
    if str(scope.get("path", "")).startswith("/api/"):
        body: ErrorAnswer = {"error": text, "kind": "error", "id": eid}
        return JSONResponse(body, status_code=500)
    return PlainTextResponse(text, status_code=500)


async def no_route(request: Request, exc: Exception) -> Response:
    """Starlette's 404 (no route) and 405 (another method) as ``{"error"}`` on ``/api/…``; a page's stay plain."""
    assert isinstance(exc, HTTPException)
    if not request.url.path.startswith("/api/"):
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)
    words = {404: "no such route of the JSON API (see /api/openapi.json)",
             405: f"{request.method} is not a method of this route"}
    body: ErrorAnswer = {"error": words.get(exc.status_code, exc.detail)}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
