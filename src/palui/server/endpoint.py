"""The plumbing of ``palui serve``'s JSON routes: the service behind a request, and the service's
refusals as HTTP answers (spec §8.1).

A :class:`~palui.errors.PaluiError` a route raises becomes ``{"error": "…"}`` with 404 (not found), 409
(an approval or question already answered, expired or cancelled) or 400 (with ``"kind"`` ``usage`` or
``error``, so a client gives the same exit code as in-process). Input that does not fit a route's model
is answered by :func:`palui.server.api.validation_answer`, anything unexpected by
:mod:`palui.server.unexpected`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse

from palui.errors import ApprovalError, NotFound, PaluiError, UsageError

if TYPE_CHECKING:
    from palui.service.api import Service


def service_of(request: Request) -> Service:
    """The service behind this app (``app.state.svc``, set by :func:`palui.server.app.create_app`)."""
    svc: Service = request.app.state.svc
    return svc


def error_response(e: PaluiError) -> JSONResponse:
    """A PaluiError as its JSON answer (see the module docstring)."""
    if isinstance(e, NotFound):
        return JSONResponse({"error": str(e)}, status_code=404)
    if isinstance(e, ApprovalError):
        return JSONResponse({"error": str(e)}, status_code=409)
    if isinstance(e, UsageError):  # "kind" lets a client give the same exit code as in-process (2)
        return JSONResponse({"error": str(e), "kind": "usage"}, status_code=400)
    return JSONResponse({"error": str(e), "kind": "error"}, status_code=400)
