"""``palui rules list|show|add|remove``: standing approvals, the person's answers given in advance (spec §5.9).

One is made on an approval card ("approve, and from now on the same": ``palui approvals approve ID --always``,
``/always ID`` in a chat, the web page's button) or here from a call the person approved earlier (``palui rules
add``, what a suggestion of ``palui report`` names). Every argument is pinned to the value the person saw unless
``--widen ARG=any|prefix:TEXT|one-of:A,B`` names it, and an argument that carried a mark of untrusted content is
never widened.
"""

from __future__ import annotations

from typing import Any

import click

from palui.cli.common import app, emit_json, group, service, widenings
from palui.text.display import shown

rules_app = group("rules", "Standing approvals: the calls you approved in advance, for one context.")
app.add_command(rules_app)


def _line(r: Any) -> str:
    uses = f"{r['uses']} use{'s' if r['uses'] != 1 else ''}"
    why = f" ({r['status_reason']})" if r["status"] != "active" and r["status_reason"] else ""
    return shown(f"{r['id']}  {r['status']}{why}  {r['tool']} in {r['context']}: {r['described']}; {uses}, until "
                 f"{r['expires_at'][:16]}", one_line=True)


@rules_app.command("list")
@click.option("--status", type=click.Choice(["active", "suspended", "expired", "removed"]),
              help="Only those of this status (default: every one but the removed).")
@click.option("--json", "as_json", is_flag=True)
def rules_list(status: str | None, as_json: bool) -> None:
    """Your standing approvals, newest first: the tool, the context, what each argument may be, uses and expiry."""
    rows = service().approvals.rules.list(status)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no standing approvals")
    for r in rows:
        click.echo(_line(r))


@rules_app.command("show")
@click.argument("rule_id")
@click.option("--json", "as_json", is_flag=True)
def rules_show(rule_id: str, as_json: bool) -> None:
    """One standing approval in full."""
    r = service().approvals.rules.get(rule_id)
    if as_json:
        return emit_json(r)
    click.echo(_line(r))
    click.echo(shown(f"bound to {r['tool']} ({r['tool_class']}, definition {r['definition_hash'][:12]}); made "
                     f"{r['created_at'][:16]} via {r['made_via']} from {r['made_from']}", one_line=True))
    for arg, c in r["constraints"].items():
        click.echo(shown(f"  {arg}: {c}", one_line=True))


@rules_app.command("add")
@click.argument("approval_id")
@click.option("--widen", multiple=True, metavar="ARG=HOW",
              help="Widen an argument you saw unmarked: ARG=any, ARG=prefix:TEXT or ARG=one-of:A,B (repeatable).")
@click.option("--confirm-destructive", is_flag=True, help="Confirm one for a destructive or unknown tool (chat only).")
@click.option("--days", type=click.IntRange(1, 366), help="How long it answers (default approvals.standing_days).")
@click.option("--json", "as_json", is_flag=True)
def rules_add(approval_id: str, widen: tuple[str, ...], confirm_destructive: bool, days: int | None,
              as_json: bool) -> None:
    """Make a standing approval from a call you approved earlier (APPROVAL_ID), for the same context."""
    r = service().approvals.rules.make(approval_id, widenings(widen), "cli", confirm_destructive, days)
    if as_json:
        return emit_json(r)
    click.echo(f"made {_line(r)}")


@rules_app.command("remove")
@click.argument("rule_id")
@click.option("--json", "as_json", is_flag=True)
def rules_remove(rule_id: str, as_json: bool) -> None:
    """Remove a standing approval: from now on its calls ask again."""
    r = service().approvals.rules.remove(rule_id, "cli")
    if as_json:
        return emit_json(r)
    click.echo(f"removed {r['id']}: {shown(r['tool'], one_line=True)} asks again in {r['context']}")
