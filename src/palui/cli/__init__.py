"""The ``palui`` command line: thin over :class:`palui.service.Service` (parse, call, print).

Exit codes (SPEC §11): 0 success (and turns ``done``/``awaiting_approval``/``queued``),
1 errors, 2 bad usage. Each command group lives in its own module and registers on
the apps of :mod:`palui.cli.common`.
"""

from __future__ import annotations

import importlib
import sys

import typer

from palui.cli.common import app
from palui.errors import PaluiError, UsageError

# Command modules, registered in this order (a missing optional module is skipped only
# while it is being written; every module listed here exists on main).
COMMAND_MODULES = ["tools", "policy", "suggest", "outside", "mcp", "signin", "memories", "turns", "audit", "report",
                   "chat", "serve", "triggers", "channels", "unit", "conversations", "elicit"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"palui.cli.{_name}")


def _setup_process() -> None:
    """Private files by default (the database holds memories, pages, the audit), and library
    log records (the MCP SDK logs parse errors of hostile servers with tracebacks) go to
    ``<data dir>/logs/palui.log`` instead of the terminal."""
    import logging
    import os

    os.umask(0o077)
    try:
        from palui.config import paths

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


def main() -> None:
    """Console entry point: maps Palui errors to exit codes (1 error, 2 bad usage)."""
    _setup_process()
    try:
        app()  # standalone: click prints usage errors and exits 2
    except UsageError as e:
        typer.echo(f"palui: {e}", err=True)
        sys.exit(2)
    except PaluiError as e:
        typer.echo(f"palui: {e}", err=True)
        sys.exit(1)
