"""``palui tools reaches-outside NAME…`` and ``palui connectors private ID``: the Rule of Two's flags (spec §4.5)."""

from __future__ import annotations

import click

from palui.cli.common import connectors_app, service, tools_app


@tools_app.command("reaches-outside")
@click.argument("names", nargs=-1, required=True)
@click.option("--off", is_flag=True, help="Drop the flag again.")
def tools_reaches_outside(names: tuple[str, ...], off: bool) -> None:
    """Flag tools whose calls reach outside: in a tainted turn, a call carrying an address from untrusted
    content or text from your private stores then asks first (web__fetch_page and openWorldHint tools always do)."""
    for r in service().tools.set_reaches_outside(list(names), not off):
        click.echo(f"{r.name}: {'reaches outside' if r.reaches_outside else 'does not reach outside'}"
                   + (" (flagged by you)" if r.outside_flag else ""))


@connectors_app.command("private")
@click.argument("cid", metavar="ID")
@click.option("--off", is_flag=True, help="Remove the mark again.")
def connectors_private(cid: str, off: bool) -> None:
    """Mark a connector's results private, like your memories and tasks: a call that reaches outside with
    text from them asks first in a tainted turn."""
    service().tools.set_private(cid, not off)
    click.echo(f"{cid}: results {'not ' if off else ''}private")
