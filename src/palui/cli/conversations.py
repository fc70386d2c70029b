"""``palui conversations list|show``: earlier conversations, each with the channel it was started on, so
``palui chat --conversation ID`` can go back to one (docs/decisions/0115-conversations-record-their-channel.md)."""

from __future__ import annotations

import time

import click

from palui.cli.common import LIMIT, emit_json, group, service, table
from palui.text.display import shown
from palui.text.when import local, relative

conversations_app = group("conversations", "Earlier conversations: list them, show one.")


def channel_word(channel: str | None) -> str:
    """A conversation's channel as listed; ``unknown`` for one started before channels were recorded."""
    return channel or "unknown"


@conversations_app.command("list")
@click.option("--limit", type=LIMIT, default=20, help="At most this many (newest first).")
@click.option("--channel", help="Only those started on this channel (terminal, cli, web, api, job, webhook, …).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def conversations_list(limit: int, channel: str | None, as_json: bool) -> None:
    """Conversations, newest first, with their channel, turns, taint and first message."""
    svc = service()
    rows = svc.conversations.list(limit, channel=channel)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no conversations yet")
        return
    tz = svc.status.timezone()
    table([[r["id"], channel_word(r["channel"]), local(r["last"] or r["created_at"], tz), str(r["turns"]),
            ("tainted" if r["tainted"] else "") + (" · live" if r["live"] else ""),
            (r["title"] or "(no message yet)")[:60]] for r in rows],
          ["ID", "CHANNEL", "LAST", "TURNS", "STATE", "FIRST MESSAGE"])
    click.echo("continue one with: palui chat --conversation ID")


@conversations_app.command("show")
@click.argument("conversation", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def conversations_show(conversation: str, as_json: bool) -> None:
    """One conversation: its channel, taint, and each turn with its message, status and answer."""
    svc = service()
    c = svc.conversations.get(conversation)
    if as_json:
        return emit_json(c)
    tz = svc.status.timezone()
    click.echo(f"conversation {c['id']} · channel {channel_word(c['channel'])} · started "
               f"{local(c['created_at'], tz)} · {len(c['turns'])} turn(s)")
    if c["tainted"]:
        click.echo(f"tainted by {shown(c['taint_source'], one_line=True)}: writes ask first; /new starts clean")
    now = time.time()
    for t in c["turns"]:
        who = {"job": "job", "webhook": "webhook"}.get(t["origin"], "you")
        click.echo(f"\n[{local(t['created_at'], tz)}] {t['turn']} · {t['status'].replace('_', ' ')}")
        click.echo(f"  {who}: {shown(t['input'])}")
        if t["answer"]:
            click.echo(f"  palui: {shown(t['answer'])}")
        for a in t["pending_approvals"]:
            click.echo(f"  waiting for approval {a['id']} ({shown(a['tool'], one_line=True)}); expires "
                       f"{relative(a['expires_at'], now, tz)}")
        if t.get("error"):
            click.echo(f"  error: {shown(t['error'], one_line=True)}")
        if t.get("budget"):
            click.echo(f"  ended: {shown(t['budget'], one_line=True)}")
    click.echo(f"\ncontinue it with: palui chat --conversation {c['id']}")
