"""How turn events, approvals and results look in the terminal (used by ``run`` and ``chat``).

Text from a model, a server or a sender is shown through :mod:`palui.text.display`: hidden
characters escaped and marked (issue 10 §2)."""

from __future__ import annotations

import json
from typing import Any

import typer

from palui.text.display import NOTE, hidden_in, shown, shown_json
from palui.text.prompts import approval_prompt


def short(value: Any, n: int = 160) -> str:
    """One line of at most about ``n`` characters: hidden characters escaped (and marked), runs of
    whitespace collapsed; cut with "…" (before escaping, so an escape is never cut in half)."""
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    s = " ".join(s.split(" "))
    cut = s if len(s) <= n else s[: n - 1] + "…"
    return shown(cut, one_line=True, note=False) + (NOTE if hidden_in(value) else "")


def exact(value: Any, n: int) -> str:
    """``value`` as escaped JSON, whitespace kept, cut after ``n`` characters with a pointer to the rest."""
    s = shown_json(value, note=False)
    note = NOTE if hidden_in(value) else ""
    return (s if len(s) <= n else s[:n] + f"… ({len(s) - n} more characters: palui approvals show ID)") + note


def event(e: dict[str, Any], err: bool = False) -> None:
    """Print one turn event as it happens."""
    kind = e.get("type")
    if kind == "tool_call":
        mark = "error" if e.get("is_error") else "ok"
        typer.echo(f"  [tool] {e['tool']} {short(e.get('args', {}), 100)} -> {e['verdict']} ({short(e['reason'], 300)})"
                   f" -> {mark}: {short(e.get('result', ''))}", err=err)
    elif kind == "tainted":
        typer.echo(f"  [taint] this conversation is now tainted by {short(e['source'], 300)}", err=err)
    elif kind == "approval":
        typer.echo(approval_prompt({"id": e["approval"], "tool": e["tool"], "class": e.get("class", "?"),
                                    "reason": e["reason"], "args": e["args"],
                                    "untrusted_args": e.get("untrusted_args", []),
                                    "expires_at": e.get("expires_at", "")}), err=err)
    elif kind == "elicitation" and e.get("status") != "pending":
        typer.echo(f"  [question] {e['connector']} asked «{short(e.get('message', ''), 200)}»: declined by Palui "
                   f"({short(e.get('reason') or '', 300)})", err=err)
    elif kind == "elicitation_answer":
        typer.echo(f"  [question] {e['elicitation']}: {e['action']}"
                   + (f" (fields: {', '.join(e['fields'])})" if e.get("fields") else ""), err=err)
    elif kind == "connector_error":
        typer.echo(f"  [connector] {e['connector']} is not available: {short(e['error'], 300)}", err=err)
    elif kind == "text":
        pass  # the answer is printed once at the end


def outcome(r: dict[str, Any], in_chat: bool = False) -> None:
    """Print a turn's result: the answer and how it ended (the chat asks for approvals itself)."""
    if r.get("answer"):
        typer.echo(shown(r["answer"]))
    status = r["status"]
    if status == "awaiting_approval" and not in_chat:
        ids = ", ".join(a["id"] for a in r.get("pending_approvals", []))
        if ids:
            typer.echo(f"[waiting for your approval: {ids}; answer with palui approvals approve|deny ID]")
        qs = ", ".join(q["id"] for q in r.get("pending_elicitations", []))
        if qs:
            typer.echo(f"[waiting for your answer to {qs}; answer with palui elicitations answer ID FIELD=VALUE…]")
    elif status == "budget":
        typer.echo(f"[turn ended: {shown(r.get('budget'), one_line=True)}]")
    elif status == "error":
        typer.echo(f"[turn failed: {shown(r.get('error'), one_line=True)}]", err=True)
    elif status == "stopped":
        typer.echo("[turn stopped]")
    elif status == "queued" and r.get("queued_behind"):
        typer.echo(f"[{r['queued_reason']}]")
    elif status == "queued":
        when = f"; it can start after {r['start_after']}" if r.get("start_after") else ""
        typer.echo(f"[queued: the {r.get('queued_reason') or 'a cap'} is reached{when}]")
