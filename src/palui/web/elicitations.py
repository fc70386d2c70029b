"""A server's question to the person on the web page (spec §7.8): its card, answering it.

The card shows the server's message (escaped, marked as the server's words), the requested fields
(enum and boolean fields as buttons; a secret field, asked only where the person allowed it, as a
password box: ``type=password``, spec §7.8), or for URL mode the full URL and its host; buttons send the
answer, decline or cancel. The page's script posts to ``POST /api/elicitations/{id}/answer`` with
``stream: true`` and shows the turn going on; without the script the form posts here. Answers go
through the service's one door (``svc.elicitations.answer``, ``answered_via = "web"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.errors import ApprovalError, UsageError
from palui.server.raw_path import RawPathRoute
from palui.text.elicitation import fields, parse_value
from palui.text.secret_fields import secret_fields
from palui.types import TurnStatus
from palui.web.base import action, page, redirect, render_fragment, svc_of
from palui.web.forms import QuestionForm, form_as

if TYPE_CHECKING:
    from palui.results import Elicitation


def card_context(q: Elicitation) -> dict[str, Any]:
    """What ``_elicitation_card.html`` needs besides the question: its form fields and which are secret."""
    return {"q": q, "form": fields(q.get("schema")), "secret": secret_fields(q.get("schema"))}


@page
async def question_card(request: Request) -> Response:
    """``GET /elicitations/{id}/card``: one question's card (the chat page shows it inline)."""
    q = svc_of(request).elicitations.get(request.path_params["id"])
    return render_fragment(request, "_elicitation_card.html", back="/approvals", **card_context(q))


def content_of(schema: dict[str, Any] | None, form: dict[str, str]) -> dict[str, Any]:
    """A posted form as typed content: empty fields left out (their defaults apply), a multi-select's
    boxes (``field.0``, ``field.1``…) joined. Raises UsageError naming the field."""
    out: dict[str, Any] = {}
    for f in fields(schema):
        if f.kind == "choices":
            chosen = [v for k, v in form.items() if k.startswith(f"{f.name}.")]
            if chosen:
                out[f.name] = chosen
            continue
        raw = form.get(f.name, "")
        if raw.strip():
            try:
                out[f.name] = parse_value(f, raw)
            except ValueError as e:
                raise UsageError(str(e)) from None
    return out


def answer(request: Request, question_id: str, verb: str, content: dict[str, Any] | None) -> Elicitation:
    """Answer through the one door and, for a turn a 2026-07-28 server paused, go on with it here."""
    svc = svc_of(request)
    try:
        q = svc.elicitations.answer(question_id, verb, content, via="web")
    except ApprovalError as e:
        if e.turn_id:
            svc.turns.launch(e.turn_id, (TurnStatus.AWAITING_APPROVAL,))
        raise
    if q["era"] == "input_required":
        svc.turns.launch(q["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return q


@action
async def answer_form(request: Request, form: dict[str, str]) -> Response:
    """``POST /elicitations/{id}/answer`` (CSRF field; ``action`` = accept|decline|cancel): answer, go back."""
    svc = svc_of(request)
    qid = request.path_params["id"]
    verb = form_as(QuestionForm, form).action
    q = svc.elicitations.get(qid)
    content = content_of(q["schema"], form) if verb == "accept" and q["mode"] == "form" else None
    q = answer(request, qid, verb, content)
    words = {"accept": "Answered", "decline": "Declined", "cancel": "Cancelled"}.get(verb, verb)
    return redirect(form.get("back") or "/approvals", ("ok", f"{words} {qid} ({q['connector']}); the turn goes on."))


def routes() -> list[Route]:
    return [
        RawPathRoute("/elicitations/{id}/card", question_card),
        RawPathRoute("/elicitations/{id}/answer", answer_form, methods=["POST"]),
    ]
