"""``palui connectors list``, ``palui tools …``, ``palui policy explain``."""

from __future__ import annotations

from typing import Optional

import typer

from palui.cli.common import connectors_app, emit_json, fail, policy_app, service, table, tools_app
from palui.types import Origin


# -- connectors -----------------------------------------------------------------------------

@connectors_app.command("list")
def connectors_list(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List connectors with their state and tool counts."""
    rows = service().connectors()
    if as_json:
        return emit_json(rows)
    table([[r["id"], r["kind"], r["state"], f"{r['enabled_tools']}/{r['tools']}",
            "yes" if r["trusted_source"] else ""] for r in rows],
          ["ID", "KIND", "STATE", "ON/TOOLS", "TRUSTED"])


# -- tools ----------------------------------------------------------------------------------

@tools_app.command("list")
def tools_list(connector: Optional[str] = typer.Option(None, "--connector", help="Only this connector's tools."),
               as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List tools: model-visible name, class and its source, switch, flags."""
    rows = service().tools(connector)
    if as_json:
        return emit_json([r.as_dict() for r in rows])
    table([[r.name, r.tool_class.value, r.class_source.value, "on" if r.enabled else "off",
            "untrusted" if r.output_untrusted else "", "changed — review" if r.changed else ""] for r in rows],
          ["NAME", "CLASS", "SOURCE", "SWITCH", "OUTPUT", "FLAGS"])


@tools_app.command("set-class")
def tools_set_class(name: str, tool_class: str = typer.Argument(..., metavar="read|write|destructive")) -> None:
    """Set a tool's class (your choice beats builtin and hints)."""
    row = service().set_class(name, tool_class)
    typer.echo(f"{row.name}: class {row.tool_class.value} (source {row.class_source.value})")


@tools_app.command("reset")
def tools_reset(name: str) -> None:
    """Drop your class choice for a tool."""
    row = service().reset_class(name)
    typer.echo(f"{row.name}: class {row.tool_class.value} (source {row.class_source.value})")


@tools_app.command("enable")
def tools_enable(names: list[str]) -> None:
    """Switch tools on."""
    for r in service().set_enabled(names, True):
        typer.echo(f"{r.name}: on")


@tools_app.command("disable")
def tools_disable(names: list[str]) -> None:
    """Switch tools off (never offered to the model)."""
    for r in service().set_enabled(names, False):
        typer.echo(f"{r.name}: off")


@tools_app.command("enable-read")
def tools_enable_read(connector: Optional[str] = typer.Argument(None)) -> None:
    """Switch on every read tool (of CONNECTOR, or of all), except tools flagged changed."""
    rows = service().enable_read(connector)
    for r in rows:
        typer.echo(f"{r.name}: on")
    typer.echo(f"{len(rows)} read tool(s) switched on")


@tools_app.command("review")
def tools_review(name: str) -> None:
    """Accept a changed tool's new definition."""
    r = service().review_tool(name)
    typer.echo(f"{r.name}: reviewed; class {r.tool_class.value} ({r.class_source.value}), "
               f"{'on' if r.enabled else 'off'}")


# -- policy ---------------------------------------------------------------------------------

@policy_app.command("explain")
def policy_explain(name: str,
                   origin: str = typer.Option("chat", "--origin", help="chat, job or webhook"),
                   tainted: bool = typer.Option(False, "--tainted", help="Decide as in a tainted turn."),
                   as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Print the verdict and reason for a tool in a situation (SPEC §3)."""
    try:
        o = Origin(origin)
    except ValueError:
        fail(f"unknown origin {origin!r}: use chat, job or webhook", 2)
    result = service().explain(name, o, tainted, "the --tainted option" if tainted else None)
    if as_json:
        return emit_json(result)
    typer.echo(f"{result['verdict']}: {result['reason'].split(': ', 1)[-1]}")
    typer.echo(f"  tool {result['tool']}, class {result['class']} ({result['class_source']}), "
               f"origin {result['origin']}, {'tainted' if tainted else 'untainted'}")


