"""The JSON routes of ``palui serve`` that the CLI and the web page use (every route needs the access token
but ``/api/health``, spec §8.1).

A front end: it reaches Palui only through the service's door. Each route is an operation of :data:`API`
(:mod:`palui.server.api`): its inputs are the models of :mod:`palui.server.inputs`, its answer a type of
:mod:`palui.results`, and ``GET /api/openapi.json`` is the OpenAPI 3.1 document generated from them (the
reference for every path, input and answer). Errors are ``{"error", "kind", "field"}`` with 400, 404
(unknown id, said as the service says it: ``unknown approval 'a-../../x'``), 409 (already answered,
expired) or 500 (``{"error", "id"}``).

Routes:

- ``GET /api/health`` (public), ``GET /api/openapi.json``, ``GET /api/status``, ``GET /api/inbox?limit=``,
  ``GET /api/audit?turn=&limit=``
- ``GET /api/connectors``, ``GET /api/tools?connector=``, ``POST /api/tools/{name}/class`` ``{"class"}``,
  ``POST /api/tools/{name}/reset|enable|disable``, ``POST /api/tools/{name}/review`` ``{"fingerprint"}``,
  ``POST /api/tools/enable-read`` ``{"connector"}``, ``POST /api/connectors/{cid}/refresh`` (in the service's
  own session, spec §7.10)
- ``POST /api/conversations`` ``{"channel"}`` → ``{"conversation"}``; ``GET /api/conversations?limit=&channel=``,
  ``GET /api/conversations/{conversation}``
- ``POST /api/turns`` ``{"message","conversation","model","channel","stream","start"}`` → the turn result
  (with ``"start": false`` at once: stored, started by the tick when its turn comes), or with
  ``stream`` an NDJSON stream: ``{"type":"turn","turn","conversation"}`` once the turn is stored, its
  events, and ``{"type":"result",…}`` last
- ``GET /api/turns/{turn}``, ``GET /api/turns/{turn}/events?after=N`` (NDJSON: the turn's events from index
  N on, live pieces included, until it settles; ``{"type":"result",…}`` last), ``POST /api/stop``
  ``{"conversation"|"turn"}``, or ``{"all": true}`` (every turn, jobs and gateway paused:
  ``{"stopped","jobs_paused","gateway_paused"}``)
- ``GET /api/approvals?all=1``, ``GET /api/approvals/{id}``, ``GET /api/approvals/{id}/wait?timeout=S``
  (returns once it is not pending, or after S seconds, at most 60), ``POST /api/approvals/{id}/approve|deny``
  (``{"stream","via"}``, a denial's ``"reason"`` and ``"stop"`` (deny and stop, spec §5.10), an approve's
  ``"always": {"widen", "confirm"}`` (and from now on the same, spec §5.9); ``{"wait": false}`` answers, resumes
  the turn here and returns the approval at once)
- ``GET /api/rules?status=``, ``GET /api/rules/{id}``, ``POST /api/rules/{id}/remove`` (standing approvals)
- ``GET /api/elicitations?all=1``, ``GET /api/elicitations/{id}``, ``POST /api/elicitations/{id}/answer``
  ``{"action": "accept"|"decline"|"cancel", "content": {…}, "stream"}`` (a server's question, spec §7.8;
  ``{"wait": false}`` answers, goes on with a paused turn here and returns the question at once)
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from palui.errors import ApprovalError
from palui.results import (
    Approval,
    AuditRow,
    Connector,
    ConnectorSync,
    Conversation,
    ConversationSummary,
    Elicitation,
    Health,
    InboxItem,
    NewConversation,
    ScopeRequest,
    StandingApproval,
    Status,
    StopAll,
    Stopped,
    StreamLine,
    Tool,
    TurnResult,
)
from palui.server.api import Operations
from palui.server.inputs import (
    MESSAGE_BODY_BYTES,
    AlwaysBody,
    ApprovalsQuery,
    ApproveAlwaysBody,
    ApproveBody,
    AuditQuery,
    ClassBody,
    ConnectorBody,
    ConversationsQuery,
    DenyBody,
    ElicitationAnswerBody,
    FollowQuery,
    InboxQuery,
    ListQuery,
    NewConversationBody,
    ReviewBody,
    RulesQuery,
    StartTurn,
    StopBody,
    ToolsQuery,
    WaitQuery,
)
from palui.server.turn_stream import NDJSON, stream_or_wait
from palui.types import TurnStatus

if TYPE_CHECKING:
    from palui.results import ResultLine
    from palui.service.api import Service

#: The JSON API's operations (the triggers' are in :mod:`palui.server.hooks`).
API = Operations()
NOT_FOUND = (404,)
ANSWERED = (404, 409)


def link(operation: str, **parameters: str) -> dict[str, Any]:
    """An OpenAPI link of a 200 answer to ``operation``, its parameters read from the answer
    (``name="$response.body#/0/name"``): what a client (and the stateful fuzzer) can do next."""
    return {"operationId": operation, "parameters": parameters}


def links(operations: tuple[str, ...], **parameters: str) -> dict[str, dict[str, Any]]:
    return {name: link(name, **parameters) for name in operations}


TOOL_ACTIONS = ("set_class", "reset_class", "enable_tool", "disable_tool", "review_tool")


@API.get("/api/health", answer=Health, public=True, summary="a Palui service, and its pid (no token needed)")
async def health(svc: Service) -> Health:
    return {"ok": True, "service": "palui", "pid": os.getpid()}


@API.get("/api/openapi.json", answer=dict[str, Any], summary="this document: the JSON API's OpenAPI 3.1 description")
async def openapi_document(svc: Service) -> dict[str, Any]:
    return document()


@API.get("/api/status", answer=Status, summary="/status: model, tokens today, caps, pause, connectors, approvals")
async def status(svc: Service) -> Status:
    return svc.status.get()


@API.get("/api/inbox", query=InboxQuery, answer=list[InboxItem], summary="the person's inbox, oldest first")
async def inbox(svc: Service, query: InboxQuery) -> list[InboxItem]:
    return svc.notifier.inbox(query.limit)


@API.get("/api/audit", query=AuditQuery, answer=list[AuditRow], summary="the audit log's newest rows")
async def audit(svc: Service, query: AuditQuery) -> list[AuditRow]:
    return svc.audit.rows(query.turn, query.limit)


@API.get("/api/connectors", answer=list[Connector], summary="every connector with its state")
async def connectors(svc: Service) -> list[Connector]:
    return svc.connectors.list()


@API.get("/api/tools", query=ToolsQuery, answer=list[Tool], refusals=NOT_FOUND, summary="every tool (of one connector)",
         links=links(TOOL_ACTIONS, name="$response.body#/0/name"))
async def tools(svc: Service, query: ToolsQuery) -> list[Tool]:
    return [t.as_dict() for t in svc.tools.list(query.connector)]


@API.post("/api/tools/enable-read", body=ConnectorBody, answer=list[Tool], refusals=NOT_FOUND,
          summary="switch on every read tool that is not flagged (of one connector)")
async def enable_read(svc: Service, body: ConnectorBody) -> list[Tool]:
    return [t.as_dict() for t in svc.tools.enable_read(body.connector)]


@API.post("/api/tools/{name}/class", body=ClassBody, answer=Tool, refusals=NOT_FOUND,
          summary="set the person's class of a tool (spec §2.3)")
async def set_class(svc: Service, name: str, body: ClassBody) -> Tool:
    return svc.tools.set_class(name, body.class_).as_dict()


@API.post("/api/tools/{name}/reset", answer=Tool, refusals=NOT_FOUND,
          summary="drop the person's class: the builtin, hints or unknown class applies again")
async def reset_class(svc: Service, name: str) -> Tool:
    return svc.tools.reset_class(name).as_dict()


@API.post("/api/tools/{name}/enable", answer=Tool, refusals=NOT_FOUND, summary="switch a tool on")
async def enable_tool(svc: Service, name: str) -> Tool:
    [row] = svc.tools.set_enabled([name], True)
    return row.as_dict()


@API.post("/api/tools/{name}/disable", answer=Tool, refusals=NOT_FOUND, summary="switch a tool off")
async def disable_tool(svc: Service, name: str) -> Tool:
    [row] = svc.tools.set_enabled([name], False)
    return row.as_dict()


@API.post("/api/tools/{name}/review", body=ReviewBody, answer=Tool, refusals=NOT_FOUND,
          summary="accept the change a flagged tool waits with (spec §7.6)")
async def review_tool(svc: Service, name: str, body: ReviewBody) -> Tool:
    # The caller names the pending change it showed (``tools/{name}`` details' fingerprint).
    return svc.tools.review(name, expected=body.fingerprint or "missing").as_dict()


@API.post("/api/connectors/{cid}/refresh", answer=ConnectorSync, refusals=NOT_FOUND,
          summary="list an MCP server's tools again in the service's own session (a lost one is started again)")
async def refresh_connector(svc: Service, cid: str) -> ConnectorSync:
    return await svc.connectors.refresh_async(cid)


@API.post("/api/conversations", body=NewConversationBody, answer=NewConversation, summary="start a conversation",
          links=links(("get_conversation",), conversation="$response.body#/conversation"))
async def new_conversation(svc: Service, body: NewConversationBody) -> NewConversation:
    return {"conversation": svc.turns.new_conversation(channel=body.channel or "api")}


@API.get("/api/conversations", query=ConversationsQuery, answer=list[ConversationSummary],
         summary="the conversations, newest first",
         links=links(("get_conversation",), conversation="$response.body#/0/id"))
async def list_conversations(svc: Service, query: ConversationsQuery) -> list[ConversationSummary]:
    return svc.conversations.list(query.limit, channel=query.channel or None)


@API.get("/api/conversations/{conversation}", answer=Conversation, refusals=NOT_FOUND,
         summary="one conversation with its turns")
async def get_conversation(svc: Service, conversation: str) -> Conversation:
    return svc.conversations.get(conversation)


@API.get("/api/turns/{turn}/events", query=FollowQuery, answer=None, stream=StreamLine, refusals=NOT_FOUND,
         summary="follow a turn: its events from index after on, as NDJSON, its result last")
async def follow_turn(svc: Service, turn: str, query: FollowQuery) -> Response:
    """The turn's events from ``after`` on, as they happen, then its result (a chat follows a
    turn that continues after an answer given elsewhere, or a message that waited behind another:
    docs/decisions/0119-following-the-truth.md)."""
    svc.turns.result(turn, [])  # an unknown turn is a 404 before the stream starts
    q: asyncio.Queue[StreamLine | None] = asyncio.Queue()

    async def run() -> None:
        try:
            r = await svc.live.follow(turn, query.after, q.put_nowait)
            last: ResultLine = {"type": "result", **r}
            q.put_nowait(last)
        finally:
            q.put_nowait(None)

    task = asyncio.create_task(run())

    async def lines() -> AsyncIterator[str]:
        try:
            while (ev := await q.get()) is not None:
                yield json.dumps(ev, default=str, allow_nan=False) + "\n"
        finally:
            task.cancel()  # done, or the client went away: stop following

    return StreamingResponse(lines(), media_type=NDJSON)


@API.post("/api/turns", body=StartTurn, answer=TurnResult, stream=StreamLine, refusals=NOT_FOUND,
          max_body=MESSAGE_BODY_BYTES, summary="send a message: a turn runs (or is stored, with start false)",
          links={**links(("get_turn",), turn="$response.body#/turn"),
                 **links(("get_conversation",), conversation="$response.body#/conversation")})
async def start_turn(svc: Service, body: StartTurn) -> Response | TurnResult:
    await svc.turns.ready()  # the model library, imported by the first turn in a worker thread
    model = svc.turns.check_model(body.model or svc.settings.model)  # a clear error before anything is stored
    tid = svc.turns.start(body.message, conversation=body.conversation, model=model, channel=body.channel or "api")
    if not body.start:
        # Stored only: the tick starts it when its conversation's earlier turns are done (spec §8).
        return svc.turns.result(tid, [])
    q = svc.live.subscribe(tid) if body.stream else None
    launched = svc.turns.launch(tid)
    return await stream_or_wait(svc, tid, launched, body.stream, q)


@API.get("/api/turns/{turn}", answer=TurnResult, refusals=NOT_FOUND, summary="a turn's result as it is now",
         links=links(("approve", "deny"), id="$response.body#/pending_approvals/0/id"))
async def get_turn(svc: Service, turn: str) -> TurnResult:
    return svc.turns.result(turn)


@API.post("/api/stop", body=StopBody, answer=Stopped | StopAll, refusals=NOT_FOUND,
          summary="stop a conversation's or a turn's turns, or every turn with all (the emergency brake)")
async def stop(svc: Service, body: StopBody) -> Stopped | StopAll:
    if body.all:  # the emergency brake (spec §5.7)
        return svc.brake.stop_all("api")
    return {"stopped": svc.turns.stop(conversation=body.conversation, turn=body.turn)}


@API.get("/api/approvals", query=ApprovalsQuery, answer=list[Approval],
         summary="pending approvals (with all: every one, newest first, a page at a time)",
         links=links(("get_approval", "approve", "deny"), id="$response.body#/0/id"))
async def list_approvals(svc: Service, query: ApprovalsQuery) -> list[Approval]:
    if not query.all:
        return svc.approvals.list("pending")
    # Every approval: newest first, a page at a time (?limit=N&before=ID), never the whole history.
    return svc.approvals.list(None, limit=query.limit, before=query.before)


@API.get("/api/approvals/{id}", answer=Approval, refusals=NOT_FOUND, summary="one approval")
async def get_approval(svc: Service, id: str) -> Approval:
    return svc.approvals.get(id)


@API.get("/api/approvals/{id}/wait", query=WaitQuery, answer=Approval, refusals=NOT_FOUND,
         summary="the approval once it is not pending, or after timeout seconds")
async def wait_approval(svc: Service, id: str, query: WaitQuery) -> Approval:
    return await svc.live.wait_approval(id, query.timeout)


async def _answer(svc: Service, aid: str, approve: bool, body: ApproveBody, reason: str | None, *,
                  always: AlwaysBody | None = None, stop: bool = False
                  ) -> Response | TurnResult | Approval | Elicitation | ScopeRequest:
    """Answer through the service's one door (``answered_via`` ``"api"``, or ``"cli"`` when the body
    says ``{"via": "cli"}``: the CLI's client, with the person's token either way), then resume the turn
    here: its events stream back with ``stream``. A refusal is 409 with the door's message."""
    try:
        a = svc.approvals.answer(aid, approve, via=body.via, reason=(reason or "").strip() or None,
                                 always=dict(always.widen) if always is not None else None,
                                 confirm=always.confirm if always is not None else False, stop=stop)
    except ApprovalError as e:
        if e.turn_id:
            svc.turns.launch(e.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # the turn goes on with the refusal
        raise
    if not body.wait:
        svc.turns.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
        return a  # the caller follows the turn (GET /api/turns/{id}/events)
    q = svc.live.subscribe(a["turn"]) if body.stream else None
    launched = svc.turns.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return await stream_or_wait(svc, a["turn"], launched, body.stream, q)


Answered = TurnResult | Approval | Elicitation | ScopeRequest


@API.post("/api/approvals/{id}/approve", body=ApproveAlwaysBody, answer=Answered,
          stream=StreamLine, refusals=ANSWERED,
          summary="approve one pending call (with always: and from now on the same), then the turn goes on")
async def approve(svc: Service, id: str, body: ApproveAlwaysBody) -> Response | Answered:
    return await _answer(svc, id, True, body, None, always=body.always)


@API.post("/api/approvals/{id}/deny", body=DenyBody, answer=Answered, stream=StreamLine, refusals=ANSWERED,
          summary="deny one pending call (the reason is told to the model), decline a question (e-…) or a "
                  "request for a wider scope (s-…)")
async def deny(svc: Service, id: str, body: DenyBody) -> Response | Answered:
    return await _answer(svc, id, False, body, body.reason, stop=body.stop)


@API.get("/api/rules", query=RulesQuery, answer=list[StandingApproval],
         summary="standing approvals (spec §5.9): every one but the removed, or those of status")
async def list_rules(svc: Service, query: RulesQuery) -> list[StandingApproval]:
    return svc.approvals.rules.list(query.status)


@API.get("/api/rules/{id}", answer=StandingApproval, refusals=NOT_FOUND, summary="one standing approval")
async def get_rule(svc: Service, id: str) -> StandingApproval:
    return svc.approvals.rules.get(id)


@API.post("/api/rules/{id}/remove", answer=StandingApproval, refusals=NOT_FOUND,
          summary="remove a standing approval: its calls ask again")
async def remove_rule(svc: Service, id: str) -> StandingApproval:
    return svc.approvals.rules.remove(id, "api")


@API.get("/api/elicitations", query=ListQuery, answer=list[Elicitation],
         summary="servers' pending questions (every one with all)",
         links=links(("get_elicitation", "answer_elicitation"), id="$response.body#/0/id"))
async def list_elicitations(svc: Service, query: ListQuery) -> list[Elicitation]:
    return svc.elicitations.list(None if query.all else "pending")


@API.get("/api/elicitations/{id}", answer=Elicitation, refusals=NOT_FOUND, summary="one server's question")
async def get_elicitation(svc: Service, id: str) -> Elicitation:
    return svc.elicitations.get(id)


@API.post("/api/elicitations/{id}/answer", body=ElicitationAnswerBody, answer=TurnResult | Elicitation,
          stream=StreamLine, refusals=ANSWERED, summary="answer a server's question (spec §7.8)")
async def answer_elicitation(svc: Service, id: str, body: ElicitationAnswerBody
                             ) -> Response | TurnResult | Elicitation:
    """Answer a server's question through the one door (``answered_via`` ``api``, ``cli`` or ``web``), then
    go on with a turn paused by a 2026-07-28 server here; an older-era turn is still running (its call
    sees the answer): the result is its current state."""
    try:
        e = svc.elicitations.answer(id, body.action, body.content, via=body.via)
    except ApprovalError as err:
        if err.turn_id:
            svc.turns.launch(err.turn_id, (TurnStatus.AWAITING_APPROVAL,))  # expired: a decline, the turn goes on
        raise
    if not body.wait:  # as for approvals: the caller follows the turn itself
        if e["era"] == "input_required":
            svc.turns.launch(e["turn"], (TurnStatus.AWAITING_APPROVAL,))
        return e
    q = svc.live.subscribe(e["turn"]) if body.stream else None
    launched = svc.turns.launch(e["turn"], (TurnStatus.AWAITING_APPROVAL,)) if e["era"] == "input_required" else None
    return await stream_or_wait(svc, e["turn"], launched, body.stream, q)


_DOCUMENT: dict[str, Any] = {}


def document() -> dict[str, Any]:
    """The OpenAPI document of every ``/api/…`` operation (these and the triggers'), built once."""
    if not _DOCUMENT:
        from palui.server import hooks, openapi

        _DOCUMENT.update(openapi.document([*API.operations, *hooks.API.operations]))
    return _DOCUMENT


def routes() -> list[BaseRoute]:
    return [*API.routes()]
