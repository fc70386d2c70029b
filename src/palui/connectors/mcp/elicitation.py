"""Elicitation at the SDK boundary: a server's question reaches the call that is waiting for it (spec §7).

Palui gives the SDK an ``elicitation_callback``, so it advertises elicitation (the SDK advertises
form and URL mode together; sampling and roots stay off). What the callback does depends on the
protocol era (MCP 2025-11-25 "Elicitation"; 2026-07-28 "Multi round-trip requests"):

- **Older connections**: the server sends ``elicitation/create`` while its ``tools/call`` is open.
  :func:`elicitation_callback` finds the call it belongs to (:class:`CallSlot`): over HTTP the SDK
  runs it in the context of the call's request, which carries the slot in a ``ContextVar``; over
  stdio no such link exists, so it is the only call of this session in flight, and when several
  are, the question is declined (Palui cannot tell which one asked). The slot's ``ask`` puts the
  question to the person; while it waits, the call's timeouts stop (the slot's ``on_wait`` and the
  SDK's ``waiting_on_a_person``).
- **2026-07-28**: ``tools/call`` is sent with ``allow_input_required``; an ``InputRequiredResult`` is
  converted once (:func:`input_required`) and the call is sent again later with
  :func:`input_responses` and the server's request state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.client.session import ClientRequestContext
from mcp.shared._request_clock import waiting_on_a_person  # private SDK API (mcp pinned to 2.3.0): tests catch a change

from palui.connectors.base import Ask, InputRequired, Question, Reply, Resume

log = logging.getLogger(__name__)


@dataclass
class CallSlot:
    """One ``tools/call`` in flight that may be asked questions: the person's ``ask`` (None: decline
    every question) and ``on_wait(True|False)`` around each wait (the connector stops its timeout)."""

    ask: Ask | None
    on_wait: Callable[[bool], None] | None = None


CURRENT_CALL: ContextVar[CallSlot | None] = ContextVar("palui_mcp_call", default=None)


def question_of(key: str, params: types.ElicitRequestParams) -> Question:
    """A :class:`Question` from the SDK's request params."""
    if isinstance(params, types.ElicitRequestURLParams):
        return Question(key=key, mode="url", message=params.message, url=params.url,
                        elicitation_id=params.elicitation_id)
    schema = params.requested_schema
    return Question(key=key, mode="form", message=params.message,
                    schema=dict(schema) if isinstance(schema, dict) else None)


def result_of(q: Question, reply: Reply) -> types.ElicitResult:
    """The ``ElicitResult`` for a reply: content only for an accepted form (URL mode sends none)."""
    if reply.action == "accept" and q.mode == "form":
        return types.ElicitResult(action="accept", content=dict(reply.content or {}))
    return types.ElicitResult(action=reply.action)


def elicitation_callback(in_flight: Callable[[], list[CallSlot]], label: str) -> Any:
    """The SDK callback of one session; ``in_flight()`` lists the calls of that session now open."""

    async def callback(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        q = question_of(str(context.request_id), params)
        slot = CURRENT_CALL.get()
        if slot is None:
            open_calls = in_flight()
            if len(open_calls) != 1:
                log.warning("%s: a question arrived with %d calls open; declined (its call is unknown)", label,
                            len(open_calls))
                return types.ElicitResult(action="decline")
            slot = open_calls[0]
        if slot.ask is None:
            return types.ElicitResult(action="decline")
        if slot.on_wait is not None:
            slot.on_wait(True)
        try:
            with waiting_on_a_person():  # over HTTP the SDK's own request clock stops too
                reply = await slot.ask(q)
        finally:
            if slot.on_wait is not None:
                slot.on_wait(False)
        return result_of(q, reply)

    return callback


def input_required(result: types.InputRequiredResult) -> InputRequired:
    """The questions of a 2026-07-28 ``input_required`` result, in the server's order."""
    questions: list[Question] = []
    other: list[str] = []
    for key, req in (result.input_requests or {}).items():
        if isinstance(req, types.ElicitRequest):
            questions.append(question_of(key, req.params))
        else:
            other.append(key)
    return InputRequired(questions=tuple(questions), request_state=result.request_state, other=tuple(other))


def input_responses(resume: Resume, questions: dict[str, Question] | None = None) -> types.InputResponses:
    """The ``inputResponses`` of a retried call, keyed as the server keyed its requests."""
    out: types.InputResponses = {}
    for key, reply in resume.replies.items():
        q = (questions or {}).get(key)
        if reply.action == "accept" and (q is None or q.mode == "form") and reply.content is not None:
            out[key] = types.ElicitResult(action="accept", content=dict(reply.content))
        else:
            out[key] = types.ElicitResult(action=reply.action)
    return out
