"""The JSON routes of ``palui serve`` that the CLI and the web page use (every route needs the access token, SPEC §8).

A front end: it reaches Palui only through the service (``request.app.state.svc``).

Routes (all JSON; errors are ``{"error": "…"}`` with 400/404/409):

- ``GET /api/health``, ``GET /api/status``, ``GET /api/inbox``, ``GET /api/audit?turn=``
- ``GET /api/connectors``, ``GET /api/tools``, ``POST /api/tools/{name}/class`` ``{"class"}``,
  ``POST /api/tools/{name}/reset|enable|disable|review``, ``POST /api/tools/enable-read`` ``{"connector"}``
- ``POST /api/conversations`` → ``{"conversation"}``
- ``POST /api/turns`` ``{"message","conversation","model","stream"}`` → the turn result, or with
  ``stream`` an NDJSON stream of events ending with ``{"type":"result",…}``
- ``GET /api/turns/{id}``, ``POST /api/stop`` ``{"conversation"|"turn"}``
- ``GET /api/approvals?all=1``, ``POST /api/approvals/{id}/approve|deny`` (``{"stream"}``)
- ``GET /api/elicitations?all=1``, ``GET /api/elicitations/{id}``, ``POST /api/elicitations/{id}/answer``
  ``{"action": "accept"|"decline"|"cancel", "content": {…}, "stream"}`` (a server's question, SPEC §7)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from palui.errors import ApprovalError, NotFound, PaluiError, UsageError
from palui.types import TurnStatus


def error_response(e: Exception) -> JSONResponse:
    if isinstance(e, NotFound):
        return JSONResponse({"error": str(e)}, status_code=404)
    if isinstance(e, ApprovalError):
        return JSONResponse({"error": str(e)}, status_code=409)
    if isinstance(e, (UsageError, PaluiError)):
        return JSONResponse({"error": str(e)}, status_code=400)
    raise e


async def body(request: Request) -> dict[str, Any]:
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


def endpoint(fn):
    async def wrapped(request: Request) -> Response:
        try:
            return await fn(request, request.app.state.svc)
        except PaluiError as e:
            return error_response(e)

    wrapped.__name__ = fn.__name__
    return wrapped


@endpoint
async def health(request, svc):
    import os

    return JSONResponse({"ok": True, "service": "palui", "pid": os.getpid()})


@endpoint
async def status(request, svc):
    return JSONResponse(svc.status())


@endpoint
async def inbox(request, svc):
    return JSONResponse(svc.inbox(int(request.query_params.get("limit", 100))))


@endpoint
async def audit(request, svc):
    return JSONResponse(svc.audit(request.query_params.get("turn"), int(request.query_params.get("limit", 500))))


@endpoint
async def connectors(request, svc):
    return JSONResponse(svc.connectors())


@endpoint
async def tools(request, svc):
    return JSONResponse([t.as_dict() for t in svc.tools(request.query_params.get("connector"))])


@endpoint
async def tool_action(request, svc):
    name, action = request.path_params["name"], request.path_params["action"]
    data = await body(request)
    if action == "class":
        row = svc.set_class(name, str(data.get("class", "")))
    elif action == "reset":
        row = svc.reset_class(name)
    elif action in ("enable", "disable"):
        [row] = svc.set_enabled([name], action == "enable")
    elif action == "review":
        # The caller names the pending change it showed (``tools/{name}`` details' fingerprint).
        row = svc.review_tool(name, expected=data.get("fingerprint") or "missing")
    else:
        raise NotFound(f"unknown action {action!r}")
    return JSONResponse(row.as_dict())


@endpoint
async def enable_read(request, svc):
    data = await body(request)
    return JSONResponse([t.as_dict() for t in svc.enable_read(data.get("connector"))])


@endpoint
async def new_conversation(request, svc):
    return JSONResponse({"conversation": svc.new_conversation()})


async def _stream_or_wait(svc, turn_id: str, launched, stream: bool, q: asyncio.Queue | None = None) -> Response:
    """The response for a launched turn: its result when it is not running here (queued behind a
    cap or another turn, or held by another process), else its events (``stream``) or its result."""
    task = launched.task if launched is not None else None
    if task is None or launched.cap or launched.behind:
        if q is not None:
            svc.unsubscribe(turn_id, q)
        result = svc.turn_result(turn_id, [])
        if launched is not None and launched.cap:
            result["queued_reason"] = launched.cap
            result["start_after"] = svc.pause_state().get("paused_until")
        if stream:
            return StreamingResponse(iter([json.dumps({"type": "result", **result}) + "\n"]),
                                     media_type="application/x-ndjson")
        return JSONResponse(result)
    if not stream:
        if q is not None:
            svc.unsubscribe(turn_id, q)
        return JSONResponse(await asyncio.shield(task))
    q = q if q is not None else svc.subscribe(turn_id)

    async def lines():
        try:
            while True:
                ev = await q.get()
                if ev is None:
                    break
                yield json.dumps(ev, default=str) + "\n"
            result = await asyncio.shield(task)
            yield json.dumps({"type": "result", **result}, default=str) + "\n"
        finally:
            svc.unsubscribe(turn_id, q)

    return StreamingResponse(lines(), media_type="application/x-ndjson")


@endpoint
async def start_turn(request, svc):
    data = await body(request)
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise UsageError("\"message\" must be a non-empty string")
    model = svc.check_model(data.get("model") or svc.settings.model)  # a clear error before anything is stored
    tid = svc.start_turn(message, conversation=data.get("conversation"), model=model)
    q = svc.subscribe(tid) if data.get("stream") else None
    launched = svc.launch(tid)
    return await _stream_or_wait(svc, tid, launched, bool(data.get("stream")), q)


@endpoint
async def get_turn(request, svc):
    return JSONResponse(svc.turn_result(request.path_params["turn"]))


@endpoint
async def stop(request, svc):
    data = await body(request)
    return JSONResponse({"stopped": svc.stop(conversation=data.get("conversation"), turn=data.get("turn"))})


@endpoint
async def list_approvals(request, svc):
    return JSONResponse(svc.approvals(None if request.query_params.get("all") else "pending"))


@endpoint
async def answer_approval(request, svc):
    """Answer through the service's one door (``answered_via`` ``"api"``, or ``"cli"`` when the body
    says ``{"via": "cli"}``), then resume the turn here:
    its events stream back with ``stream``. A refusal is 409 with the door's message."""
    aid, action = request.path_params["id"], request.path_params["action"]
    if action not in ("approve", "deny"):
        raise NotFound(f"unknown action {action!r}")
    data = await body(request)
    # The CLI's client says it is the CLI (the person's token either way); anything else is "api".
    via = "cli" if data.get("via") == "cli" else "api"
    try:
        a = svc.answer_approval(aid, action == "approve", via=via)
    except ApprovalError as e:
        if e.turn_id:
            svc.launch(e.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # the turn goes on with the refusal
        raise
    q = svc.subscribe(a["turn"]) if data.get("stream") else None
    launched = svc.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return await _stream_or_wait(svc, a["turn"], launched, bool(data.get("stream")), q)


@endpoint
async def list_elicitations(request, svc):
    return JSONResponse(svc.elicitations(None if request.query_params.get("all") else "pending"))


@endpoint
async def get_elicitation(request, svc):
    return JSONResponse(svc.elicitation(request.path_params["id"]))


@endpoint
async def answer_elicitation(request, svc):
    """Answer a server's question through the one door (``answered_via`` ``api``, or ``cli``), then go on
    with a turn paused by a 2026-07-28 server here; an older-era turn is still running (its call sees
    the answer): the result is its current state."""
    data = await body(request)
    content = data.get("content")
    if content is not None and not isinstance(content, dict):
        raise UsageError("\"content\" must be an object of field: value")
    via = data.get("via") if data.get("via") in ("cli", "web") else "api"  # the web page's script says "web"
    try:
        e = svc.answer_elicitation(request.path_params["id"], str(data.get("action", "")), content, via=via)
    except ApprovalError as err:
        if err.turn_id:
            svc.launch(err.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # expired: a decline, the turn goes on
        raise
    stream = bool(data.get("stream"))
    q = svc.subscribe(e["turn"]) if stream else None
    launched = svc.launch(e["turn"], (TurnStatus.AWAITING_APPROVAL,)) if e["era"] == "input_required" else None
    return await _stream_or_wait(svc, e["turn"], launched, stream, q)


def routes() -> list[Route]:
    return [
        Route("/api/health", health),
        Route("/api/status", status),
        Route("/api/inbox", inbox),
        Route("/api/audit", audit),
        Route("/api/connectors", connectors),
        Route("/api/tools", tools),
        Route("/api/tools/enable-read", enable_read, methods=["POST"]),
        Route("/api/tools/{name}/{action}", tool_action, methods=["POST"]),
        Route("/api/conversations", new_conversation, methods=["POST"]),
        Route("/api/turns", start_turn, methods=["POST"]),
        Route("/api/turns/{turn}", get_turn),
        Route("/api/stop", stop, methods=["POST"]),
        Route("/api/approvals", list_approvals),
        Route("/api/approvals/{id}/{action}", answer_approval, methods=["POST"]),
        Route("/api/elicitations", list_elicitations),
        Route("/api/elicitations/{id}", get_elicitation),
        Route("/api/elicitations/{id}/answer", answer_elicitation, methods=["POST"]),
    ]
