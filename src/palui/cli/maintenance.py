"""``palui prune --before DATE`` and ``palui backup FILE`` (spec §10.1, §10.2)."""

from __future__ import annotations

import click

from palui.cli.common import app, emit_json, service
from palui.text.display import shown


@app.command("prune")
@click.option("--before", required=True, metavar="DATE",
              help="Delete what is older: YYYY-MM-DD (midnight in caps.timezone) or an ISO time.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def prune_cmd(before: str, as_json: bool) -> None:
    """Delete untrusted content, inbox messages and webhook deliveries older than DATE (the audit is kept)."""
    r = service().maintenance.prune(before)
    if as_json:
        return emit_json(r)
    d = r["deleted"]
    click.echo(f"before {r['before']}: deleted {d['untrusted_content']} untrusted content row(s), "
               f"{d['inbox']} inbox message(s), {d['webhook_deliveries']} webhook delivery record(s)")
    if r["replay_keys_kept"]:
        click.echo(f"kept {r['replay_keys_kept']} webhook delivery record(s) older than that: each still refuses its "
                   "delivery sent again, until its own retention (retention.days; 24 h for Standard Webhooks)")


@app.command("backup")
@click.argument("file", metavar="FILE", help="A new file for the copy (mode 0600).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def backup_cmd(file: str, as_json: bool) -> None:
    """Copy the database into FILE (SQLite's online backup: safe while the service runs)."""
    r = service().maintenance.backup(file)
    if as_json:
        return emit_json(r)
    click.echo(f"backup written: {shown(r['file'], one_line=True)} ({r['bytes']} bytes)")
