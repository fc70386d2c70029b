"""``palui tools suggest CONNECTOR [--accept] [--accept-tool NAME]``: classes for unknown tools (spec §2.4).

The tool names and descriptions shown are the server's own words: printed escaped (palui.text.display).
"""

from __future__ import annotations

import click

from palui.cli.common import emit_json, service, table, tools_app
from palui.text.display import shown


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


@tools_app.command("suggest")
@click.argument("connector", metavar="CONNECTOR")
@click.option("--accept", is_flag=True, help="Accept every write and destructive suggestion (never read).")
@click.option("--accept-tool", metavar="NAME", help="Accept one tool's suggestion (the way to accept a read one).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tools_suggest(connector: str, accept: bool, accept_tool: str | None, as_json: bool) -> None:
    """Suggest a class for each unknown tool of CONNECTOR from its name and description; nothing changes
    until you accept."""
    svc = service()
    if accept_tool:
        rows = svc.suggestions.list(connector)
        s = next((r for r in rows if r["name"] == accept_tool), None)
        expected = s["suggestion"] if s else ""
        got = svc.suggestions.accept(accept_tool, expected or "")
        if as_json:
            return emit_json([got])
        click.echo(f"{got['name']}: class {got['suggestion']} (user) — {shown(got['reason'], one_line=True)}")
        return
    if accept:
        done = svc.suggestions.accept_all(connector)
        if as_json:
            return emit_json(done)
        for s in done:
            click.echo(f"{s['name']}: class {s['suggestion']} (user) — {shown(s['reason'], one_line=True)}")
        left = [r for r in svc.suggestions.list(connector) if r["suggestion"] == "read"]
        click.echo(f"{len(done)} suggestion(s) accepted" + (
            f"; {len(left)} read suggestion(s) are accepted one at a time: palui tools suggest {connector} "
            f"--accept-tool NAME" if left else ""))
        return
    rows = svc.suggestions.list(connector)
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo(f"{connector} has no tool without a class")
        return
    table([[r["name"], r["suggestion"] or "(unknown)", r["reason"], _short(r["description"])] for r in rows],
          ["NAME", "SUGGESTED", "WHY", "DESCRIPTION (the server's words)"])
    bulk = sum(1 for r in rows if r["suggestion"] in ("write", "destructive"))
    reads = sum(1 for r in rows if r["suggestion"] == "read")
    click.echo(f"Nothing is changed yet. palui tools suggest {connector} --accept takes the {bulk} write and "
               f"destructive suggestion(s)" + (f"; accept each of the {reads} read suggestion(s) alone: palui "
                                               f"tools suggest {connector} --accept-tool NAME" if reads else "") + ".")
