"""The ``palui`` command line: thin over :class:`palui.service.Service` (parse, call, print).

Exit codes (spec §11): 0 success (and turns ``done``/``awaiting_approval``/``queued``),
1 errors, 2 bad usage. Each command group lives in its own module and registers on
the Click groups of :mod:`palui.cli.common`.
"""

from __future__ import annotations

import importlib
import sys

import click

from palui.cli.common import app, said
from palui.errors import PaluiError, UsageError

# Command modules, registered in this order (a missing optional module is skipped only
# while it is being written; every module listed here exists on main).
COMMAND_MODULES = ["tools", "policy", "suggest", "outside", "mcp", "signin", "memories", "turns", "audit", "report",
                   "chat", "serve", "triggers", "channels", "unit", "conversations", "maintenance", "elicit",
                   "gateway"]

# The modules that define each top-level command or group (a command imports only what it needs:
# docs/decisions/0085-a-light-cli-start.md). A name not listed here, ``palui --help`` and ``palui`` alone
# load every module, so a new command works before it is listed.
# tests/test_cli_start.py checks that each entry gives the same commands as loading everything.
COMMANDS: dict[str, tuple[str, ...]] = {
    "tools": ("tools", "suggest", "outside"), "policy": ("tools", "policy"),
    "connectors": ("tools", "mcp", "outside", "signin"),
    "memories": ("memories",), "tasks": ("memories",),
    "run": ("turns",), "approvals": ("turns",), "stop": ("turns",), "status": ("turns",), "inbox": ("turns",),
    "audit": ("audit",), "report": ("report",), "chat": ("chat",), "conversations": ("conversations",),
    "serve": ("serve",), "jobs": ("triggers",), "webhooks": ("triggers",),
    "prune": ("maintenance",), "backup": ("maintenance",), "channels": ("channels",), "service": ("unit",),
    "elicitations": ("elicit",), "gateway": ("gateway",),
}

app.command_order = tuple(COMMANDS)  # ``palui --help`` lists them so, whatever ran before in this process


def load_commands(argv: list[str] | None = None) -> list[str]:
    """Import the command modules ``argv`` (the arguments after ``palui``) needs; every one when
    ``argv`` is None or names no known command. Returns the modules imported."""
    first = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    names = [n for n in COMMAND_MODULES if n in COMMANDS.get(first or "", ())] or COMMAND_MODULES
    for name in names:
        importlib.import_module(f"palui.cli.{name}")
    return names


def _setup_process() -> None:
    """Private files by default (the database holds memories, pages, the audit), and library
    log records (the MCP SDK logs parse errors of hostile servers with tracebacks) go to
    ``<data dir>/logs/palui.log`` instead of the terminal."""
    import logging
    import os

    os.umask(0o077)
    try:
        from palui.home import paths

        _home, data_dir, _cfg = paths()
        logs = data_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(logs / "palui.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    except OSError:
        handler = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def main(argv: list[str] | None = None, prog_name: str | None = None) -> None:
    """Console entry point: maps Palui errors to exit codes (1 error, 2 bad usage) and ends with
    ``SystemExit``, as Click's standalone mode does.

    Args:
        argv: the arguments after ``palui`` (None: ``sys.argv[1:]``); the test suite runs commands
            in-process through this (``tests/support/inprocess.py``).
        prog_name: the name usage lines show (None: Click's, from ``sys.argv[0]``).
    """
    _setup_process()
    args = sys.argv[1:] if argv is None else list(argv)
    load_commands(args)
    try:
        app(args=args, prog_name=prog_name)  # standalone: click prints usage errors and exits 2
    except UsageError as e:
        click.echo(f"palui: {said(str(e))}", err=True)
        sys.exit(2)
    except PaluiError as e:
        click.echo(f"palui: {said(str(e))}", err=True)
        sys.exit(1)

