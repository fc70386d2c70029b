"""The ``palui`` command line: thin over :class:`palui.service.Service` (parse, call, print).

Exit codes (spec §11): 0 success (and turns ``done``/``awaiting_approval``/``queued``),
1 errors, 2 bad usage. Each command group lives in its own module and registers on
the Click groups of :mod:`palui.cli.common`.
"""

from __future__ import annotations

import importlib
import sys

import click

from palui.cli.common import Group, Hooks, app, said
from palui.errors import PaluiError, UsageError

# Command modules, registered in this order (a missing optional module is skipped only
# while it is being written; every module listed here exists on main).
COMMAND_MODULES = ["tools", "policy", "suggest", "outside", "mcp", "signin", "memories", "turns", "audit", "report",
                   "chat", "serve", "triggers", "channels", "unit", "conversations", "maintenance", "elicitations",
                   "gateway", "rules"]

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
    "elicitations": ("elicitations",), "gateway": ("gateway",), "rules": ("rules",),
}


#: The top-level commands the command modules add (those of :mod:`palui.cli.common` aside), in the order
#: loading every module adds them: each one's summary (the first paragraph of its help, words joined by single
#: spaces) and whether it is a group. ``palui --help``, ``palui --version`` and a bare ``palui`` name no
#: command, so they list these instead of importing every command module (docs/decisions/0085-a-light-cli-start.md).
#: tests/test_cli_start.py checks that the help printed from them is the one loading every module prints.
SUMMARIES: tuple[tuple[str, str, bool], ...] = (
    ("memories", "Your saved memories: list, forget, mark trusted.", True),
    ("tasks", "Your tasks: list, forget, mark trusted.", True),
    ("approvals", "Pending approvals: list, show, approve, deny.", True),
    ("run", "Run one turn non-interactively and print the answer.", False),
    ("status", "Model, tokens today against the caps, runs in the last hour, pause, connectors, approvals.", False),
    ("inbox", "The person's channel: answers, job results, webhook summaries, approval requests, notices.", False),
    ("stop", "Stop a running, waiting or queued turn from another terminal, and cancel its approvals.", False),
    ("audit", "The tool-call log: list it, verify its hash chain, export it.", True),
    ("report", "Asks per day and how they were answered, what caused them, the tools asked most, job turns that"
               " waited, calls refused as not offered, what tainted your conversations — and suggestions, one"
               " command each.", False),
    ("chat", "Talk to Palui in the terminal. Commands: /stop /status /why /approve /deny /answer ID /new /help /quit.",
     False),
    ("serve", "Run the service: scheduler, webhooks, the JSON API and the web page. Stops cleanly on"
              " SIGTERM/SIGINT.", False),
    ("jobs", "Scheduled jobs: prompts run on a cron schedule by the service.", True),
    ("webhooks", "Inbound webhooks: signed deliveries summarised with no tools.", True),
    ("channels", "Chat channels: talk to Palui and answer approvals from Telegram, Matrix, Slack, Discord or email.",
     True),
    ("service", "Run palui serve at login (systemd user unit, launchd agent).", True),
    ("conversations", "Earlier conversations: list them, show one.", True),
    ("prune", "Delete untrusted content, inbox messages and webhook deliveries older than DATE (the audit is"
              " kept).", False),
    ("backup", "Copy the database into FILE (SQLite's online backup: safe while the service runs).", False),
    ("elicitations", "Questions MCP servers ask you: list, show, answer.", True),
    ("gateway", "Offer your governed tools to other MCP clients (coding agents, desktop apps, editors).", True),
    ("rules", "Standing approvals: the calls you approved in advance, for one context.", True),
)


#: The order ``palui --help`` lists the top-level commands in (groups after commands, :class:`~palui.cli.common.Group`),
#: whichever module a process imported first (the test suite runs commands in one process).
ORDER = ("connectors", "tools", "policy", *(name for name, _summary, _group in SUMMARIES))


def _in_order() -> None:
    """Put the top-level commands in :data:`ORDER` (one not listed there last, in the order it was added)."""
    rank = {name: i for i, name in enumerate(ORDER)}
    ordered = sorted(app.commands.items(), key=lambda item: rank.get(item[0], len(rank)))
    app.commands.clear()
    app.commands.update(ordered)


def _add_summaries() -> None:
    """Add a stand-in of each top-level command not loaded yet, with its summary (for listing only: a
    command module loaded later replaces it in place, keeping the order)."""
    for name, summary, is_group in SUMMARIES:
        if name not in app.commands:
            app.add_command(Group(name, help=summary) if is_group else click.Command(name, help=summary))


def load_commands(argv: list[str] | None = None) -> list[str]:
    """Import the command modules ``argv`` (the arguments after ``palui``) needs; every one when
    ``argv`` is None or names no known command. Arguments that name no command (``--help``, ``--version``,
    none) import none: the top-level commands are listed from :data:`SUMMARIES`. Returns the modules imported."""
    first = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    if argv is not None and first is None:
        _add_summaries()
        _in_order()
        return []
    names = [n for n in COMMAND_MODULES if n in COMMANDS.get(first or "", ())] or COMMAND_MODULES
    for name in names:
        importlib.import_module(f"palui.cli.{name}")
    _in_order()
    return names


def _setup_process() -> None:
    """Library log records (the MCP SDK logs parse errors of hostile servers with tracebacks) go to
    ``<data dir>/logs/palui.log``, capped and rotated, instead of the terminal."""
    import logging

    try:
        from palui.cli.process_log import handler as capped_log
        from palui.home import paths

        _home, data_dir, _cfg = paths()
        handler: logging.Handler = capped_log(data_dir)  # capped and rotated (cli/process_log.py)
    except OSError:
        handler = logging.NullHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def main(argv: list[str] | None = None, prog_name: str | None = None, *, hooks: Hooks | None = None) -> None:
    """Console entry point: maps Palui errors to exit codes (1 error, 2 bad usage) and ends with
    ``SystemExit``, as Click's standalone mode does.

    Args:
        argv: the arguments after ``palui`` (None: ``sys.argv[1:]``); the test suite runs commands
            in-process through this (``tests/support/inprocess.py``).
        prog_name: the name usage lines show (None: Click's, from ``sys.argv[0]``).
        hooks: what the calling program plugs into the service the command builds (:class:`Hooks`: the
            test suite's in-process MCP servers); None for the real command line.
    """
    import os

    os.umask(0o077)  # private files by default: the database holds memories, pages, the audit
    args = sys.argv[1:] if argv is None else list(argv)
    if load_commands(args):  # a command runs (help, the version or a usage error alone log nothing)
        _setup_process()
    try:
        app(args=args, prog_name=prog_name, obj=hooks)  # standalone: click prints usage errors and exits 2
    except UsageError as e:
        click.echo(f"palui: {said(str(e))}", err=True)
        sys.exit(2)
    except PaluiError as e:
        click.echo(f"palui: {said(str(e))}", err=True)
        sys.exit(1)

