"""The chat page: conversations, turns with their tool calls, taint and approvals (SPEC §3-§5, §8).

A message is sent by the page's script to ``POST /api/turns`` with ``stream: true``
and the NDJSON events are shown as they arrive; without the script the form posts
to ``/chat/send`` and the page shows the turn when it is done. Chat commands
(``/stop``, ``/new``, ``/status``, ``/approve ID``, ``/deny ID``, ``/help``) are
parsed by :mod:`palui.chat_commands`, the terminal chat's parser, and never reach
the model.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from palui import chat_commands
from palui.errors import NotFound, PaluiError, UsageError
from palui.runner import approvals as approvals_mod
from palui.server.web_base import (SECURITY_HEADERS, CSRFRefused, action, page, read_form, redirect, render,
                                   render_fragment, runtime_of, svc_of)
from palui.types import TurnStatus

LIVE = ("running", "queued", "awaiting_approval")


# -- reading conversations --------------------------------------------------------------------
# The service API has no conversation listing yet (the CLI never lists them): these two
# read-only queries are the page's own; everything about a turn comes from turn_result().


def conversations(svc, limit: int = 50) -> list[dict[str, Any]]:
    """Newest first: ``[{"id","origin","tainted","taint_source","title","last","turns"}]`` (times in epoch s)."""
    rows = svc.db.all(
        "SELECT c.id, c.origin, c.tainted, c.taint_source, c.created_at,"
        " (SELECT input FROM turns t WHERE t.conversation_id = c.id ORDER BY t.created_at LIMIT 1) AS title,"
        " (SELECT MAX(created_at) FROM turns t WHERE t.conversation_id = c.id) AS last,"
        " (SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id) AS turns"
        " FROM conversations c ORDER BY COALESCE(last, c.created_at) DESC LIMIT ?", (limit,))
    return [dict(r) for r in rows]


def conversation(svc, cid: str) -> dict[str, Any]:
    """One conversation with its turns (each :meth:`turn_result` plus ``input`` and ``created_at``).

    Raises NotFound.
    """
    c = svc.db.one("SELECT * FROM conversations WHERE id = ?", (cid,))
    if c is None:
        raise NotFound(f"unknown conversation {cid!r}")
    turns = [turn_view(svc, r["id"]) for r in
             svc.db.all("SELECT id FROM turns WHERE conversation_id = ? ORDER BY created_at", (cid,))]
    return {"id": c["id"], "origin": c["origin"], "tainted": bool(c["tainted"]), "taint_source": c["taint_source"],
            "turns": turns}


def turn_view(svc, turn_id: str) -> dict[str, Any]:
    """A turn as the page shows it: :meth:`turn_result`, its input, and each approval's current state."""
    r = svc.turn_result(turn_id)
    row = svc.db.one("SELECT input, created_at FROM turns WHERE id = ?", (turn_id,))
    r["input"] = row["input"]
    r["created_at"] = row["created_at"]
    states: dict[str, dict[str, Any]] = {}
    for e in r["events"]:
        if e.get("type") == "approval":
            try:
                states[e["approval"]] = approvals_mod.get(svc.db, e["approval"])
            except NotFound:
                pass
    r["approvals"] = states
    if r["status"] == "queued":
        r["pause"] = svc.pause_state()
    return r


# -- pages ----------------------------------------------------------------------------------------


@page
async def chat_page(request: Request) -> Response:
    """``GET /chat`` (a new conversation starts with the first message) and ``GET /chat/{conversation}``."""
    svc = svc_of(request)
    cid = request.path_params.get("conversation")
    conv = conversation(svc, cid) if cid else None
    return render(request, "chat.html", conversations=conversations(svc), conv=conv, model=svc.settings.model,
                  live=LIVE)


async def new_chat(request: Request) -> Response:
    """``GET /new``: a clean conversation (SPEC §4: taint is cleared by /new)."""
    return redirect("/chat")


@page
async def turn_fragment(request: Request) -> Response:
    """``GET /chat/turns/{turn}``: one turn's HTML, swapped in by the page's script when it changes."""
    svc = svc_of(request)
    t = turn_view(svc, request.path_params["turn"])
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
    if cmd.name == "/quit":
        return {"text": "/quit is for the terminal chat; close the tab to leave.", "redirect": None, "turn": None}
    if cmd.name == "/status":
        from palui.server.web_status import status_text

        return {"text": status_text(svc.status()), "redirect": None, "turn": None}
    if cmd.name == "/stop":
        if not conversation:
            return {"text": "Nothing to stop: this conversation has no turn yet.", "redirect": None, "turn": None}
        stopped = svc.stop(conversation=conversation)
        text = f"Stopped {', '.join(stopped)}." if stopped else "Nothing to stop: no turn is running or waiting."
        return {"text": text, "redirect": None, "turn": stopped[0] if stopped else None}
    # /approve ID, /deny ID
    a = answer(request, cmd.arg, cmd.name == "/approve")
    word = "Approved" if a["status"] == "approved" else "Denied"
    return {"text": f"{word} {a['id']} ({a['tool']}); the turn goes on.", "redirect": None, "turn": a["turn"]}


def answer(request: Request, approval_id: str, approve: bool) -> dict[str, Any]:
    """Record the person's answer and resume the turn in this service (SPEC §5). Returns the approval.

    Raises NotFound, ApprovalError.
    """
    svc, rt = svc_of(request), runtime_of(request)
    a = approvals_mod.answer(svc.db, approval_id, approve)
    rt.start_turn(a["turn"], (TurnStatus.AWAITING_APPROVAL,))
    return a


async def command(request: Request) -> Response:
    """``POST /chat/command`` ``{"line","conversation"}`` (the page's script; CSRF header) →
    ``{"text","redirect","turn"}`` or ``{"error"}`` (400)."""
    try:
        form = await read_form(request)
    except CSRFRefused as e:
        return JSONResponse({"error": str(e)}, status_code=403)
    try:
        cmd = chat_commands.parse(form.get("line", ""))
        if cmd is None:
            raise UsageError("not a command (commands start with /)")
        out = run_command(request, cmd, form.get("conversation") or None)
    except chat_commands.CommandError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    except PaluiError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse(out, headers=SECURITY_HEADERS)


@action
async def send(request: Request, form: dict[str, str]) -> Response:
    """``POST /chat/send`` (the form without the script): a command, or a message that starts a turn."""
    svc, rt = svc_of(request), runtime_of(request)
    conv = form.get("conversation") or None
    back = f"/chat/{conv}" if conv else "/chat"
    line = form.get("message", "")
    try:
        cmd = chat_commands.parse(line)
    except chat_commands.CommandError as e:
        return redirect(back, ("error", str(e)))
    if cmd is not None:
        out = run_command(request, cmd, conv)
        return redirect(out["redirect"] or back, ("ok", out["text"]))
    if not line.strip():
        return redirect(back, ("error", "Type a message first."))
    from palui.models import resolve_model

    model = svc.settings.model
    resolve_model(model)  # a clear error before anything is stored
    tid = svc.start_turn(line, conversation=conv, model=model)
    rt.start_turn(tid, (TurnStatus.QUEUED,))
    conv = svc.turn_result(tid, [])["conversation"]
    return redirect(f"/chat/{conv}#{tid}")


def routes() -> list[Route]:
    return [
        Route("/chat", chat_page),
        Route("/new", new_chat),
        Route("/chat/send", send, methods=["POST"]),
        Route("/chat/command", command, methods=["POST"]),
        Route("/chat/turns/{turn}", turn_fragment),
        Route("/chat/{conversation}", chat_page),
    ]

