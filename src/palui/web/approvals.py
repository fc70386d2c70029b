"""The approvals page: pending calls with their exact arguments, class, reason and time left;
untrusted argument values marked with their source; Approve / Deny, "Approve, and from now on the same" (a
standing approval, with a widening for each argument shown unmarked, spec §5.9) and "Deny and stop" (spec §5.10);
the questions MCP servers ask (spec §7, :mod:`palui.web.elicitations`); the history (spec §4, §5).

The buttons are forms (CSRF field). The page's script sends them to
``POST /api/approvals/{id}/approve|deny`` with ``stream: true`` (and ``always`` or ``stop``) instead and shows the
resumed turn's events in the card until the turn finishes or pauses again.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from palui.errors import NotFound
from palui.server.raw_path import RawPathRoute
from palui.text.display import named
from palui.web.base import action, page, redirect, render, render_fragment, svc_of
from palui.web.chat import answer, answered_text
from palui.web.forms import AlwaysForm, DenyForm, form_as, widenings_of

HISTORY = 100


@page
async def approvals_page(request: Request) -> Response:
    """``GET /approvals[?before=ID]``: pending first (oldest first: they expire first), then the answered ones,
    newest first, a page of ``HISTORY`` at a time (``before``: the last id of the page before), so the page costs
    the same after a million approvals."""
    svc = svc_of(request)
    pending = svc.approvals.list("pending")
    page = svc.approvals.list(None, limit=HISTORY, before=request.query_params.get("before") or None)
    history = [a for a in page if a["status"] != "pending"]
    return render(request, "approvals.html", approvals=pending, history=history,
                  older=page[-1]["id"] if len(page) == HISTORY else None, questions=svc.elicitations.list("pending"))


@page
async def approval_card(request: Request) -> Response:
    """``GET /approvals/{id}/card``: one approval's card (the chat page shows it inline)."""
    svc = svc_of(request)
    a = svc.approvals.get(request.path_params["id"])
    return render_fragment(request, "_approval_card.html", a=a, back="/approvals")


@action
async def answer_form(request: Request, form: dict[str, str]) -> Response:
    """``POST /approvals/{id}/approve|deny|always|denystop`` (CSRF field): answer, resume the turn, go back.
    ``always``: approve, and from now on the same (spec §5.9, its widenings and confirmation from the form);
    ``denystop``: deny and stop (spec §5.10)."""
    verb = request.path_params["action"]
    if verb not in ("approve", "deny", "always", "denystop"):
        raise NotFound(f"unknown action {named(verb)}")
    reason = form_as(DenyForm, form).reason if verb in ("deny", "denystop") else None
    reason = reason.strip() or None if reason else None
    always = widenings_of(form) if verb == "always" else None
    confirm = form_as(AlwaysForm, form).confirm if verb == "always" else False
    a = answer(request, request.path_params["id"], verb in ("approve", "always"), reason, always=always,
               confirm=confirm, stop=verb == "denystop")
    return redirect(form.get("back") or "/approvals", ("ok", answered_text(a)))


def routes() -> list[Route]:
    return [
        Route("/approvals", approvals_page),
        RawPathRoute("/approvals/{id}/card", approval_card),
        RawPathRoute("/approvals/{id}/{action}", answer_form, methods=["POST"]),
    ]
