"""The chat page: conversations, turns with their tool calls, taint and approvals (spec §3-§5, §8).

A message is sent by the page's script to ``POST /api/turns`` with ``stream: true``
and the NDJSON events are shown as they arrive; without the script the form posts
to ``/chat/send`` and the page shows the turn when it is done. Chat commands
(``/stop``, ``/new``, ``/status``, ``/approve ID``, ``/deny ID``, ``/help``) are
parsed by :mod:`palui.text.commands`, the terminal chat's parser, and never reach
the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from palui.errors import ApprovalError, PaluiError, UsageError
from palui.server.raw_path import RawPathRoute
from palui.text import commands as chat_commands
from palui.text.elicitation import parse_pairs
from palui.types import TurnStatus
from palui.web.base import (
    SECURITY_HEADERS,
    CSRFRefused,
    action,
    page,
    read_form,
    redirect,
    render,
    render_fragment,
    svc_of,
)
from palui.web.forms import ChatForm, form_as

if TYPE_CHECKING:
    from palui.results import Approval, Elicitation, ScopeRequest

LIVE = ("running", "queued", "awaiting_approval")


# -- pages ----------------------------------------------------------------------------------------


@page
async def chat_page(request: Request) -> Response:
    """``GET /chat`` (a new conversation starts with the first message) and ``GET /chat/{conversation}``."""
    svc = svc_of(request)
    cid = request.path_params.get("conversation")
    conv = svc.conversations.get(cid) if cid else None
    return render(request, "chat.html", conversations=svc.conversations.list(), conv=conv, model=svc.settings.model,
                  live=LIVE)


async def new_chat(request: Request) -> Response:
    """``GET /new``: a clean conversation (spec §4: taint is cleared by /new)."""
    return redirect("/chat")


@page
async def turn_fragment(request: Request) -> Response:
    """``GET /chat/turns/{turn}``: one turn's HTML, swapped in by the page's script when it changes."""
    svc = svc_of(request)
    t = svc.conversations.turn_detail(request.path_params["turn"])
    return render_fragment(request, "_turn.html", turn=t, live=LIVE)


# -- commands and sending ---------------------------------------------------------------------------


def run_command(request: Request, cmd: chat_commands.Command, conversation: str | None) -> dict[str, Any]:
    """Carry out a chat command. Returns ``{"text", "redirect", "turn"}`` (redirect/turn may be None).

    Raises PaluiError (unknown approval, already answered, …).
    """
    svc = svc_of(request)
    if cmd.name == "/new":
        return {"text": "A new conversation starts with your next message.", "redirect": "/chat", "turn": None}
    if cmd.name == "/help":
        return {"text": chat_commands.help_text(), "redirect": None, "turn": None}
    if cmd.name == "/why":
        return {"text": "Each call's reason is under it on this page (and in the audit log).", "redirect": None,
                "turn": None}
    if cmd.name == "/quit":
        return {"text": "/quit is for the terminal chat; close the tab to leave.", "redirect": None, "turn": None}
    if cmd.name == "/status":
        from palui.web.status import status_text

        return {"text": status_text(svc.status.get(), svc.status.timezone()), "redirect": None, "turn": None}
    if cmd.name == "/stop" and cmd.arg == "all":
        r = svc.brake.stop_all("web")
        ids = r["stopped"]
        text = (f"Stopped {', '.join(ids)}." if ids else "No turn was running.") + " Jobs are paused until you " \
            "resume them (palui jobs resume), the gateway until palui gateway resume."
        return {"text": text, "redirect": None, "turn": None}
    if cmd.name == "/stop":
        if not conversation:
            return {"text": "Nothing to stop: this conversation has no turn yet.", "redirect": None, "turn": None}
        stopped = svc.turns.stop(conversation=conversation)
        text = f"Stopped {', '.join(stopped)}." if stopped else "Nothing to stop: no turn is running or waiting."
        return {"text": text, "redirect": None, "turn": stopped[0] if stopped else None}
    if cmd.name == "/answer":
        from palui.web.elicitations import answer as answer_question

        qid, pairs = chat_commands.answer_args(cmd.arg)
        q = svc.elicitations.get(qid)
        from palui.text.secret_fields import secret_fields

        named = sorted({p.partition("=")[0].strip() for p in pairs} & set(secret_fields(q["schema"])))
        if named and q["mode"] == "form":  # the typed line would stay in the page and the browser's history
            raise UsageError(f"{', '.join(named)} asks for a secret: it is not typed on the /answer line; type it in "
                             "the question's card (a password box)")
        try:
            content = parse_pairs(q["schema"], pairs) if q["mode"] == "form" else None
        except ValueError as e:
            raise UsageError(str(e)) from None
        q = answer_question(request, qid, "accept", content)
        return {"text": f"Answered {qid} ({q['connector']}); the turn goes on.", "redirect": None, "turn": q["turn"]}
    # /approve ID, /deny ID (a question's id: declined)
    if cmd.arg.startswith("e-") and cmd.name == "/deny":
        from palui.web.elicitations import answer as answer_question

        q = answer_question(request, cmd.arg, "decline", None)
        text = f"Declined {cmd.arg} ({q['connector']}); the turn goes on."
        return {"text": text, "redirect": None, "turn": q["turn"]}
    a = answer(request, cmd.arg, cmd.approves, cmd.reason or None, always=cmd.always, confirm=cmd.confirm,
               stop=cmd.stop)
    return {"text": answered_text(a), "redirect": None, "turn": a["turn"]}


def answered_text(a: Any) -> str:
    """What the page says of an answer: approved or denied, and what follows (spec §5.9, §5.10)."""
    word = "Approved" if a["status"] == "approved" else "Denied"
    if a.get("rule_made"):
        return f"{word} {a['id']} ({a['tool']}), and from now on the same (standing approval {a['rule_made']})."
    if a.get("stop"):
        return f"{word} {a['id']} ({a['tool']}) and stopped the turn's tool use; the model answers without tools."
    return f"{word} {a['id']} ({a['tool']}); the turn goes on."


def answer(request: Request, approval_id: str, approve: bool, reason: str | None = None, *,
           always: dict[str, str] | None = None, confirm: bool = False,
           stop: bool = False) -> Approval | Elicitation | ScopeRequest:
    """Answer through the service's one door (``answered_via = "web"``) and resume the turn in this
    service (spec §5). ``reason``: a denial's, told to the model (``/deny ID REASON``); ``always``: approve, and
    from now on the same (spec §5.9); ``stop``: deny and stop (spec §5.10). Returns the approval.

    Raises NotFound, ApprovalError (the same refusals as every front end; a turn that can go on
    with the refusal is resumed first).
    """
    svc = svc_of(request)
    try:
        a = svc.approvals.answer(approval_id, approve, via="web", reason=reason, always=always, confirm=confirm,
                                 stop=stop)
    except ApprovalError as e:
        if e.turn_id:
            svc.turns.launch(e.turn_id, (TurnStatus.AWAITING_APPROVAL,))
        raise
    svc.turns.launch(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return a


async def command(request: Request) -> Response:
    """``POST /chat/command`` ``{"line","conversation"}`` (the page's script; CSRF header) →
    ``{"text","redirect","turn"}`` or ``{"error"}`` (400)."""
    try:
        form = await read_form(request)
    except CSRFRefused as e:
        return JSONResponse({"error": str(e)}, status_code=403)
    try:
        f = form_as(ChatForm, form)
        cmd = chat_commands.parse(f.line)
        if cmd is None:
            raise UsageError("not a command (commands start with /)")
        out = run_command(request, cmd, f.conversation)
    except chat_commands.CommandError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    except PaluiError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse(out, headers=SECURITY_HEADERS)


@action
async def send(request: Request, form: dict[str, str]) -> Response:
    """``POST /chat/send`` (the form without the script): a command, or a message that starts a turn."""
    svc = svc_of(request)
    f = form_as(ChatForm, form)
    conv = f.conversation
    back = f"/chat/{conv}" if conv else "/chat"
    line = f.message
    try:
        cmd = chat_commands.parse(line)
    except chat_commands.CommandError as e:
        return redirect(back, ("error", str(e)))
    if cmd is not None:
        out = run_command(request, cmd, conv)
        return redirect(out["redirect"] or back, ("ok", out["text"]))
    if not line.strip():
        return redirect(back, ("error", "Type a message first."))
    await svc.turns.ready()  # the model library, imported by the first turn in a worker thread
    model = svc.turns.check_model(svc.settings.model)  # a clear error before anything is stored
    tid = svc.turns.start(line, conversation=conv, model=model, channel="web")
    svc.turns.launch(tid)
    conv = svc.turns.result(tid, [])["conversation"]
    return redirect(f"/chat/{conv}#{tid}")


def routes() -> list[Route]:
    return [
        Route("/chat", chat_page),
        Route("/new", new_chat),
        Route("/chat/send", send, methods=["POST"]),
        Route("/chat/command", command, methods=["POST"]),
        RawPathRoute("/chat/turns/{turn}", turn_fragment),
        RawPathRoute("/chat/{conversation}", chat_page),
    ]

