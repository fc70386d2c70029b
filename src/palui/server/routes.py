"""The JSON routes of ``palui serve`` that the CLI and the web page use (every route needs the access token, spec §8).

A front end: it reaches Palui only through the service's door (:mod:`palui.server.endpoint` hands each
route the service).

Routes (all JSON; errors are ``{"error": "…"}`` with 400/404/409):

- ``GET /api/health``, ``GET /api/status``, ``GET /api/inbox``, ``GET /api/audit?turn=``
- ``GET /api/connectors``, ``GET /api/tools``, ``POST /api/tools/{name}/class`` ``{"class"}``,
  ``POST /api/tools/{name}/reset|enable|disable|review``, ``POST /api/tools/enable-read`` ``{"connector"}``
- ``POST /api/conversations`` ``{"channel"}`` → ``{"conversation"}``; ``GET /api/conversations?channel=``,
  ``GET /api/conversations/{id}``
- ``POST /api/turns`` ``{"message","conversation","model","channel","stream","start"}`` → the turn result
  (with ``"start": false`` at once: stored, started by the tick when its turn comes), or with
  ``stream`` an NDJSON stream: ``{"type":"turn","turn","conversation"}`` once the turn is stored, its
  events, and ``{"type":"result",…}`` last
- ``GET /api/turns/{id}``, ``GET /api/turns/{id}/events?after=N`` (NDJSON: the turn's events from index
  N on, live pieces included, until it settles; ``{"type":"result",…}`` last), ``POST /api/stop``
  ``{"conversation"|"turn"}``, or ``{"all": true}`` (every turn, jobs paused: ``{"stopped","jobs_paused"}``)
- ``GET /api/approvals?all=1``, ``GET /api/approvals/{id}``, ``GET /api/approvals/{id}/wait?timeout=S``
  (returns once it is not pending, or after S seconds, at most 60), ``POST /api/approvals/{id}/approve|deny``
  (``{"stream"}``; ``{"wait": false}`` answers, resumes the turn here and returns the approval at once)
- ``GET /api/elicitations?all=1``, ``GET /api/elicitations/{id}``, ``POST /api/elicitations/{id}/answer``
  ``{"action": "accept"|"decline"|"cancel", "content": {…}, "stream"}`` (a server's question, spec §7;
  ``{"wait": false}`` answers, goes on with a paused turn here and returns the question at once)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from palui.errors import ApprovalError, NotFound, UsageError
from palui.server.endpoint import body, endpoint
from palui.server.turn_stream import NDJSON, stream_or_wait
from palui.types import TurnStatus

if TYPE_CHECKING:
    from palui.results import ResultLine, StreamLine
    from palui.service.door import ServiceDoor


@endpoint
async def health(request: Request, svc: ServiceDoor) -> Response:
    import os

    return JSONResponse({"ok": True, "service": "palui", "pid": os.getpid()})


@endpoint
async def status(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.status())


@endpoint
async def inbox(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.inbox(int(request.query_params.get("limit", 100))))


@endpoint
async def audit(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.audit(request.query_params.get("turn"), int(request.query_params.get("limit", 500))))


@endpoint
async def connectors(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.connectors())


@endpoint
async def tools(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse([t.as_dict() for t in svc.tools(request.query_params.get("connector"))])


@endpoint
async def tool_action(request: Request, svc: ServiceDoor) -> Response:
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
async def enable_read(request: Request, svc: ServiceDoor) -> Response:
    data = await body(request)
    return JSONResponse([t.as_dict() for t in svc.enable_read(data.get("connector"))])


@endpoint
async def new_conversation(request: Request, svc: ServiceDoor) -> Response:
    data = await body(request)
    return JSONResponse({"conversation": svc.new_conversation(channel=data.get("channel") or "api")})


@endpoint
async def list_conversations(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.conversations(int(request.query_params.get("limit", 50)),
                                          channel=request.query_params.get("channel") or None))


@endpoint
async def get_conversation(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.conversation(request.path_params["conversation"]))


@endpoint
async def follow_turn(request: Request, svc: ServiceDoor) -> Response:
    """The turn's events from ``after`` on, as they happen, then its result (a chat follows a
    turn that continues after an answer given elsewhere, or a message that waited behind another:
    docs/decisions/0119-following-the-truth.md)."""
    tid = request.path_params["turn"]
    try:
        after = max(0, int(request.query_params.get("after", 0)))
    except ValueError:
        raise UsageError("after must be a whole number") from None
    svc.turn_result(tid, [])  # an unknown turn is a 404 before the stream starts
    q: asyncio.Queue[StreamLine | None] = asyncio.Queue()

    async def run() -> None:
        try:
            r = await svc.follow_turn(tid, after, q.put_nowait)
            last: ResultLine = {"type": "result", **r}
            q.put_nowait(last)
        finally:
            q.put_nowait(None)

    task = asyncio.create_task(run())

    async def lines() -> AsyncIterator[str]:
        try:
            while (ev := await q.get()) is not None:
                yield json.dumps(ev, default=str) + "\n"
        finally:
            task.cancel()  # done, or the client went away: stop following

    return StreamingResponse(lines(), media_type=NDJSON)


@endpoint
async def start_turn(request: Request, svc: ServiceDoor) -> Response:
    data = await body(request)
    message = data.get("message")
    if not isinstance(message, str) or not message.strip():
        raise UsageError("\"message\" must be a non-empty string")
    model = svc.check_model(data.get("model") or svc.settings.model)  # a clear error before anything is stored
    tid = svc.start_turn(message, conversation=data.get("conversation"), model=model,
                         channel=data.get("channel") or "api")
    if data.get("start") is False:
        # Stored only: the tick starts it when its conversation's earlier turns are done (spec §8).
        return JSONResponse(svc.turn_result(tid, []))
    q = svc.subscribe(tid) if data.get("stream") else None
    launched = svc.launch(tid)
    return await stream_or_wait(svc, tid, launched, bool(data.get("stream")), q)


@endpoint
async def get_turn(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.turn_result(request.path_params["turn"]))


@endpoint
async def stop(request: Request, svc: ServiceDoor) -> Response:
    data = await body(request)
    if data.get("all") is True:  # the emergency brake (spec §5.7)
        return JSONResponse(svc.stop_all("api"))
    return JSONResponse({"stopped": svc.stop(conversation=data.get("conversation"), turn=data.get("turn"))})


@endpoint
async def list_approvals(request: Request, svc: ServiceDoor) -> Response:
    q = request.query_params
    if not q.get("all"):
        return JSONResponse(svc.approvals("pending"))
    # Every approval: newest first, a page at a time (?limit=N&before=ID), never the whole history.
    limit = q.get("limit", "100")
    if not limit.isdigit():
        raise UsageError("limit is a number of approvals (1 to 1,000)")
    return JSONResponse(svc.approvals(None, limit=int(limit), before=q.get("before")))


@endpoint
async def get_approval(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.approval(request.path_params["id"]))


@endpoint
async def wait_approval(request: Request, svc: ServiceDoor) -> Response:
    try:
        timeout = min(60.0, max(0.0, float(request.query_params.get("timeout", 25))))
    except ValueError:
        raise UsageError("timeout must be a number of seconds") from None
    return JSONResponse(await svc.wait_approval(request.path_params["id"], timeout))


@endpoint
async def answer_approval(request: Request, svc: ServiceDoor) -> Response:
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
        reason = data.get("reason") if action == "deny" else None
        if reason is not None and not isinstance(reason, str):
            raise UsageError('"reason" must be a string (why the person denies it)')
        a = svc.answer_approval(aid, action == "approve", via=via, reason=(reason or "").strip() or None)
    except ApprovalError as e:
        if e.turn_id:
            svc.launch(e.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # the turn goes on with the refusal
        raise
    if data.get("wait") is False:
        svc.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
        return JSONResponse(a)  # the caller follows the turn (GET /api/turns/{id}/events)
    q = svc.subscribe(a["turn"]) if data.get("stream") else None
    launched = svc.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return await stream_or_wait(svc, a["turn"], launched, bool(data.get("stream")), q)


@endpoint
async def list_elicitations(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.elicitations(None if request.query_params.get("all") else "pending"))


@endpoint
async def get_elicitation(request: Request, svc: ServiceDoor) -> Response:
    return JSONResponse(svc.elicitation(request.path_params["id"]))


@endpoint
async def answer_elicitation(request: Request, svc: ServiceDoor) -> Response:
    """Answer a server's question through the one door (``answered_via`` ``api``, or ``cli``), then go on
    with a turn paused by a 2026-07-28 server here; an older-era turn is still running (its call sees
    the answer): the result is its current state."""
    data = await body(request)
    content = data.get("content")
    if content is not None and not isinstance(content, dict):
        raise UsageError("\"content\" must be an object of field: value")
    via: str = data["via"] if data.get("via") in ("cli", "web") else "api"  # the web page's script says "web"
    try:
        e = svc.answer_elicitation(request.path_params["id"], str(data.get("action", "")), content, via=via)
    except ApprovalError as err:
        if err.turn_id:
            svc.launch(err.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # expired: a decline, the turn goes on
        raise
    if data.get("wait") is False:  # as for approvals: the caller follows the turn itself
        if e["era"] == "input_required":
            svc.launch(e["turn"], (TurnStatus.AWAITING_APPROVAL,))
        return JSONResponse(e)
    stream = bool(data.get("stream"))
    q = svc.subscribe(e["turn"]) if stream else None
    launched = svc.launch(e["turn"], (TurnStatus.AWAITING_APPROVAL,)) if e["era"] == "input_required" else None
    return await stream_or_wait(svc, e["turn"], launched, stream, q)


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
        Route("/api/conversations", list_conversations, methods=["GET"]),
        Route("/api/conversations/{conversation}", get_conversation),
        Route("/api/turns", start_turn, methods=["POST"]),
        Route("/api/turns/{turn}", get_turn),
        Route("/api/turns/{turn}/events", follow_turn),
        Route("/api/stop", stop, methods=["POST"]),
        Route("/api/approvals", list_approvals),
        Route("/api/approvals/{id}", get_approval),
        Route("/api/approvals/{id}/wait", wait_approval),
        Route("/api/approvals/{id}/{action}", answer_approval, methods=["POST"]),
        Route("/api/elicitations", list_elicitations),
        Route("/api/elicitations/{id}", get_elicitation),
        Route("/api/elicitations/{id}/answer", answer_elicitation, methods=["POST"]),
    ]
