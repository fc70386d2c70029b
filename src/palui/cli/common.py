"""Shared pieces of the command line: the Click groups, output helpers, the service handle.

Start cost (docs/decisions/0085-a-light-cli-start.md): every command pays for what the CLI imports before
it runs, so command modules import only Click and these helpers at the top and everything else
inside the command. The command line is plain Click (not Typer: importing Typer and building its
commands from function signatures on every start cost more than most commands take).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from palui import __version__
from palui.errors import ConfigError
from palui.text.display import json_safe, shown

if TYPE_CHECKING:
    from palui.service.api import Service
    from palui.service.light import ReadService

S = TypeVar("S")


class Group(click.Group):
    """A command group whose help lists its commands, then its groups, each in the order they were added
    (as the command line always listed them), not alphabetically."""

    group_class = type  # a group made with ``@some_group.group(...)`` is a Group too

    def list_commands(self, ctx: click.Context) -> list[str]:
        items = self.commands.items()
        return ([n for n, c in items if not isinstance(c, click.Group)]
                + [n for n, c in items if isinstance(c, click.Group)])


def _version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"palui {__version__}")
        ctx.exit()


# ``show_default``: the help of every command shows option defaults (``[default: 100]``).
app = Group("palui", help="Palui: a personal AI agent whose tools are governed.", no_args_is_help=True,
            context_settings={"show_default": True},
            params=[click.Option(["--version"], is_flag=True, expose_value=False, is_eager=True, callback=_version,
                                 help="Print the version and exit.")])


def group(name: str, help: str, **kw: Any) -> Group:
    """A command group ``palui NAME``; alone (no command), it prints its help (exit 2, as bad usage)."""
    g = Group(name, **{"help": help, "no_args_is_help": True, **kw})
    app.add_command(g)
    return g


connectors_app = group("connectors", "Sources of tools: built-in connectors and MCP servers.")
tools_app = group("tools", "Tools: classes, switches, review.")
policy_app = group("policy", "The decision matrix: why a tool runs, asks or is not offered.")


# Whole-number options and arguments, bounded so that a huge value is a usage error (exit 2), not an
# overflow deep in SQLite (whose integers are 64-bit) or a negative LIMIT that means "no limit".
LIMIT = click.IntRange(1, 1_000_000)  # --limit N: how many rows to show
ROW_ID = click.IntRange(1, 2**63 - 1)  # a memory's or task's id


class Setting(click.ParamType[Any, Any]):
    """An option that gives, for one thing, what a configuration key gives for all (``connectors add
    --timeout`` is ``mcp.call_timeout_seconds`` for one server): the key's rule in the settings model bounds
    it, as it bounds the key in palui.toml (spec §10.4): ``--timeout inf`` is a usage error (exit 2) saying
    ``must be a finite number (got inf)``, as ``call_timeout_seconds = inf`` refuses to start. The model is
    read when a value is given, not when the command is defined (``palui --help`` reads no settings)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.name = key

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        from palui.config_rules import Refused
        from palui.config_schema import option_value

        try:
            return option_value(self.key, value)
        except Refused as e:
            self.fail(str(e), param, ctx)


class Clean(click.ParamType[Any, Any]):
    """Text that becomes a path, a host, a URL or a process argument (``--cwd``, ``--model script:PATH``):
    a control character in it (NUL, a line feed, an escape) is a usage error naming where, as in palui.toml
    (spec §10.4)."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from palui.text.escape import control_character

        where = control_character(value) if isinstance(value, str) else None
        if where:
            self.fail(f"must not contain control characters ({where})", param, ctx)
        return value


CLEAN = Clean()


def said(message: str) -> str:
    """An error message as printed: escaped (spec §4.7) when it holds a raw control, bidi or other
    hidden character (a path or name put in it as given); one without (every message whose names were
    escaped where it was made) is printed as it is, so its escapes are not doubled."""
    from palui.text.escape import has_hidden

    return shown(message, note=False) if has_hidden(message) else message


def fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"palui: {said(message)}", err=True)
    raise click.exceptions.Exit(code)


@dataclass(frozen=True)
class Hooks:
    """What a program that runs the command line in its own process plugs into the service the commands
    build (``palui.cli.main(argv, hooks=Hooks(...))``; the test suite runs its MCP servers in its process
    this way). The command line itself never makes one: no option, setting or variable reaches it.

    Attributes:
        mcp_transport: ``Service(mcp_transport=...)``: called with an MCP server's configuration, it returns
            the SDK transport to reach it through, or None for the configured one
            (``palui.connectors.mcp.config.TransportFactory``, which a front end does not import).
    """

    mcp_transport: Callable[[Any], Any] | None = None


def service() -> Service:
    """The whole service (:class:`palui.service.Service`: a front end calls its parts), with the :class:`Hooks`
    ``main`` was given; a bad configuration exits 1 with its error."""
    from palui.service import Service

    ctx = click.get_current_context(silent=True)
    hooks = (ctx.find_object(Hooks) if ctx is not None else None) or Hooks()
    return _started(lambda: Service(mcp_transport=hooks.mcp_transport))


def read_service() -> ReadService:
    """The read parts alone (:class:`palui.service.light.ReadService`), for the read-only commands (``tools
    list``, ``status``, ``approvals list``, ``audit``, ``conversations list``, ``jobs list``): it starts without
    the runner, the connectors' code or the model library (docs/decisions/0085-a-light-cli-start.md), and
    builds only the part the command reads. Its parts are the full service's of the same names and classes, or
    the read part the full one answers through (``LIGHT_PARTS``, ``READ_PARTS``)."""
    from palui.service.light import ReadService

    return _started(ReadService)


def _started(cls: Callable[[], S]) -> S:
    """``cls()`` (a service over this environment's PALUI_HOME); a bad configuration exits 1 with its error."""
    try:
        return cls()
    except ConfigError as e:
        fail(f"configuration error: {e}")


def emit_json(value: Any) -> None:
    """``--json`` output: real JSON, with every hidden character as a ``\\u`` escape (spec §4.7, §11)."""
    click.echo(json_safe(value))


def table(rows: list[list[str]], headers: list[str]) -> None:
    """A plain-text table; every cell one line, hidden characters escaped and marked (spec §4.7)."""
    rows = [[shown(str(x), one_line=True) for x in r] for r in rows]
    if rows:
        widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows, strict=False)]
    else:
        widths = [len(h) for h in headers]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    click.echo(line.rstrip())
    for r in rows:
        click.echo("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=False)).rstrip())


def widenings(values: tuple[str, ...]) -> dict[str, str]:
    """``--widen ARG=any`` options (a standing approval's, spec §5.9) as ``{arg: widening}``. Raises
    click.BadParameter for one without ``=``."""
    out: dict[str, str] = {}
    for v in values:
        arg, eq, how = v.partition("=")
        if not eq or not arg:
            raise click.BadParameter(f"{v!r}: write ARG=any, ARG=prefix:TEXT or ARG=one-of:A,B", param_hint="--widen")
        out[arg] = how
    return out
