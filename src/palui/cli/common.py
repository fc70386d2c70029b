"""Shared pieces of the command line: the Typer apps, output helpers, the service handle.

Start cost (issue 11, docs/decisions.md): every command pays for what the CLI imports before
it runs, so command modules import only Typer and these helpers at the top and everything else
inside the command. Help is Typer's plain Click formatting (``rich_markup_mode=None``), not the
rich formatter; every command group is made by :func:`group`, so none turns rich back on.
"""

from __future__ import annotations

from typing import Any

import typer

from palui import __version__
from palui.cli import lazy_params
from palui.errors import ConfigError
from palui.text.display import json_safe, shown

lazy_params.install()


def group(help: str, **kw: Any) -> typer.Typer:
    """A command group with plain Click help (no rich: importing it cost more than most commands)."""
    return typer.Typer(**{"help": help, "no_args_is_help": True, "rich_markup_mode": None,
                          "pretty_exceptions_enable": False, **kw})


app = group("Palui: a personal AI agent whose tools are governed.", add_completion=False)
connectors_app = group("Sources of tools: built-in connectors and MCP servers.")
tools_app = group("Tools: classes, switches, review.")
policy_app = group("The decision matrix: why a tool runs, asks or is not offered.")
app.add_typer(connectors_app, name="connectors")
app.add_typer(tools_app, name="tools")
app.add_typer(policy_app, name="policy")


def fail(message: str, code: int = 1) -> None:
    typer.echo(f"palui: {message}", err=True)
    raise typer.Exit(code)


def service():
    """The whole service (:class:`palui.service.Service`); a bad configuration exits 1 with its error."""
    from palui.service import Service

    try:
        return Service()
    except ConfigError as e:
        fail(f"configuration error: {e}")


def tools_service():
    """The tools part alone (:class:`palui.service.light.ToolsService`), for commands that only read
    the catalog: it starts with a third of the imports of :func:`service` (issue 11)."""
    from palui.service.light import ToolsService

    try:
        return ToolsService()
    except ConfigError as e:
        fail(f"configuration error: {e}")


def emit_json(value: Any) -> None:
    """``--json`` output: real JSON, with every hidden character as a ``\\u`` escape (issue 10 §2)."""
    typer.echo(json_safe(value))


def table(rows: list[list[str]], headers: list[str]) -> None:
    """A plain-text table; every cell one line, hidden characters escaped and marked (issue 10 §2)."""
    rows = [[shown(str(x), one_line=True) for x in r] for r in rows]
    if rows:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    else:
        widths = [len(h) for h in headers]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    typer.echo(line.rstrip())
    for r in rows:
        typer.echo("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=False)).rstrip())


def _version(value: bool) -> None:
    if value:
        typer.echo(f"palui {__version__}")
        raise typer.Exit()


@app.callback()
def root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                      help="Print the version and exit.")) -> None:
    """Palui: a personal AI agent whose tools are governed."""


