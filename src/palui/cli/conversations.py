"""``palui conversations list|show`` (issue 12): earlier conversations, each with the channel it was
started on, so ``palui chat --conversation ID`` can go back to one."""

from __future__ import annotations

import time

import typer

from palui.cli.common import app, emit_json, group, service, table
from palui.text.display import shown
from palui.text.when import local, relative

conversations_app = group("Earlier conversations: list them, show one.")
app.add_typer(conversations_app, name="conversations")


def channel_word(channel: str | None) -> str:
    """A conversation's channel as listed; ``unknown`` for one started before channels were recorded."""
    return channel or "unknown"


@conversations_app.command("list")
def conversations_list(limit: int = typer.Option(20, "--limit", help="At most this many (newest first)."),
                       channel: str | None = typer.Option(None, "--channel",
                                                          help="Only those started on this channel "
                                                               "(terminal, cli, web, api, job, webhook, …)."),
                       as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Conversations, newest first, with their channel, turns, taint and first message."""
    svc = service()
    rows = svc.conversations(limit, channel=channel)
    if as_json:
        return emit_json(rows)
    if not rows:
        typer.echo("no conversations yet")
        return
    tz = svc.timezone()
    table([[r["id"], channel_word(r["channel"]), local(r["last"] or r["created_at"], tz), str(r["turns"]),
            ("tainted" if r["tainted"] else "") + (" · live" if r["live"] else ""),
            (r["title"] or "(no message yet)")[:60]] for r in rows],
          ["ID", "CHANNEL", "LAST", "TURNS", "STATE", "FIRST MESSAGE"])
    typer.echo("continue one with: palui chat --conversation ID")


@conversations_app.command("show")
def conversations_show(conversation: str = typer.Argument(..., metavar="ID"),
                       as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """One conversation: its channel, taint, and each turn with its message, status and answer."""
    svc = service()
    c = svc.conversation(conversation)
    if as_json:
        return emit_json(c)
    tz = svc.timezone()
    typer.echo(f"conversation {c['id']} · channel {channel_word(c['channel'])} · started "
               f"{local(c['created_at'], tz)} · {len(c['turns'])} turn(s)")
    if c["tainted"]:
        typer.echo(f"tainted by {shown(c['taint_source'], one_line=True)}: writes ask first; /new starts clean")
    now = time.time()
    for t in c["turns"]:
        who = {"job": "job", "webhook": "webhook"}.get(t["origin"], "you")
        typer.echo(f"\n[{local(t['created_at'], tz)}] {t['turn']} · {t['status'].replace('_', ' ')}")
        typer.echo(f"  {who}: {shown(t['input'])}")
        if t["answer"]:
            typer.echo(f"  palui: {shown(t['answer'])}")
        for a in t["pending_approvals"]:
            typer.echo(f"  waiting for approval {a['id']} ({shown(a['tool'], one_line=True)}); expires "
                       f"{relative(a['expires_at'], now, tz)}")
        if t.get("error"):
            typer.echo(f"  error: {shown(t['error'], one_line=True)}")
        if t.get("budget"):
            typer.echo(f"  ended: {shown(t['budget'], one_line=True)}")
    typer.echo(f"\ncontinue it with: palui chat --conversation {c['id']}")
