"""``palui audit`` (the tool-call log), ``palui audit verify`` and ``palui audit export`` (spec §10.3)."""

from __future__ import annotations

import json

import click

from palui.cli import render
from palui.cli.common import LIMIT, app, emit_json, service, table
from palui.text.display import shown
from palui.text.when import local


# ``palui audit`` alone lists the log (this group's callback); its help is the group's, not the docstring.
@app.group("audit", help="The tool-call log: list it, verify its hash chain, export it.", invoke_without_command=True)
@click.option("--turn", help="Only this turn's calls.")
@click.option("--limit", type=LIMIT, default=200, help="At most this many rows (newest).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def audit_app(ctx: click.Context, turn: str | None, limit: int, as_json: bool) -> None:
    """The tool-call log: decision, reason and outcome of every call (``verify`` and ``export`` below)."""
    if ctx.invoked_subcommand is not None:
        return
    svc = service()
    rows = svc.audit.rows(turn, limit)
    if as_json:
        return emit_json(rows)
    tz = svc.status.timezone()
    table([[local(r["time"], tz, "%Y-%m-%d %H:%M:%S"), r["turn"] or "", r["client"] or "", r["tool"], r["class"] or "?",
            r["verdict"],
            "tainted" if r["tainted"] else "", r["outcome"], render.short(r["reason"], 70)] for r in rows],
          ["TIME", "TURN", "CLIENT", "TOOL", "CLASS", "VERDICT", "TAINT", "OUTCOME", "REASON"])


@audit_app.command("verify")
@click.option("--head", metavar="HASH", help="Check against a head you noted (its hash, or its first 16+ hex digits) "
                                             "as well as the audit_head file.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def audit_verify(head: str | None, as_json: bool) -> None:
    """Check the hash chain: names the first row changed, inserted or deleted (exit 1), or rows missing at the end."""
    r = service().audit.verify(head)
    if as_json:
        emit_json(r)
    elif r["ok"]:
        last = r["last"]
        against = "the noted head and " if head else ""
        click.echo(f"audit chain intact: {r['rows']} row(s)" + (
            f", head row {last['id']} hash {last['hash']} (checked against {against}the audit_head file)"
            if last and r["head_file"] else ", checked against the noted head" if last else ""))
        if r.get("interrupted"):  # not a tampering: the process died between the head and the commit
            click.echo(f"note: {r['interrupted']['message']}; the next audit row takes its id")
    else:
        click.echo(f"audit chain broken: {shown(r['problem']['message'], one_line=True)}", err=True)
    raise click.exceptions.Exit(0 if r["ok"] else 1)


@audit_app.command("export")
@click.option("--jsonl", is_flag=True, default=True, help="One JSON object per line (the only format).")
@click.option("--since", metavar="WHEN",
              help="Only rows from this date (YYYY-MM-DD, caps.timezone) or ISO time on.")
def audit_export(jsonl: bool, since: str | None) -> None:
    """Write the audit rows with their hashes, oldest first, one JSON object per line (as hashed)."""
    for row in service().audit.export(since):
        # ensure_ascii: every hidden character of a reason is a \\u escape, never raw on a terminal.
        click.echo(json.dumps(row, ensure_ascii=True, separators=(",", ":"), allow_nan=False))
