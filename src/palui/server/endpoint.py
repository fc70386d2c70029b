"""The plumbing of ``palui serve``'s JSON routes: the service behind a request, the request's JSON body,
and the service's refusals as HTTP answers (spec §8).

Every JSON route is an :func:`endpoint`: a coroutine of the request and the service that returns a
response; a :class:`~palui.errors.PaluiError` it raises becomes ``{"error": "…"}`` with 404 (not
found), 409 (an approval or question already answered, expired or cancelled) or 400 (with ``"kind"``
``usage`` or ``error``, so a client gives the same exit code as in-process).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from palui.errors import ApprovalError, NotFound, PaluiError, UsageError

if TYPE_CHECKING:
    from palui.service.door import ServiceDoor
    from palui.types import JSON

#: A JSON route's body: the request and the service in, the response out.
Handler = Callable[[Request, "ServiceDoor"], Awaitable[Response]]


def service_of(request: Request) -> ServiceDoor:
    """The service behind this app (``app.state.svc``, set by :func:`palui.server.app.create_app`)."""
    svc: ServiceDoor = request.app.state.svc
    return svc


def error_response(e: Exception) -> JSONResponse:
    """A PaluiError as its JSON answer (see the module docstring); any other exception is raised again."""
    if isinstance(e, NotFound):
        return JSONResponse({"error": str(e)}, status_code=404)
    if isinstance(e, ApprovalError):
        return JSONResponse({"error": str(e)}, status_code=409)
    if isinstance(e, UsageError):  # "kind" lets a client give the same exit code as in-process (2)
        return JSONResponse({"error": str(e), "kind": "usage"}, status_code=400)
    if isinstance(e, PaluiError):
        return JSONResponse({"error": str(e), "kind": "error"}, status_code=400)
    raise e


async def body(request: Request) -> JSON:
    """The request's JSON object (``{}`` when the body is empty). Raises UsageError when it is not JSON or
    not an object."""
    raw = await request.body()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise UsageError("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise UsageError("the request body must be a JSON object")
    return data


def endpoint(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette route of ``fn(request, svc)``; a PaluiError it raises is answered by :func:`error_response`."""

    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request, service_of(request))
        except PaluiError as e:
            return error_response(e)

    wrapped.__name__ = fn.__name__
    return wrapped
