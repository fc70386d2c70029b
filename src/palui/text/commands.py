"""Chat commands (spec §8): handled by Palui, never sent to the model.

Shared by the terminal chat and the web page: :func:`parse` tells a command from a
message. Anything starting with ``/`` is a command; an unknown one is an error, so a
mistyped ``/aprove`` never reaches the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

COMMANDS = {
    "/stop": ("stop the conversation's turn (running, waiting or queued), cancel its approvals; "
              "in the terminal Ctrl-C stops a running turn. /stop all — the emergency brake: stop every "
              "turn of every conversation and pause the jobs until palui jobs resume"),
    "/status": "model, tokens today and caps, runs in the last hour, connectors, approvals, pause",
    "/why": "each tool call of the latest turn with the reason for its decision",
    "/approve": "/approve ID — allow one pending call, exactly as shown",
    "/deny": "/deny ID [reason] — refuse one pending call (the model is told, with your reason), or decline a question",
    "/answer": "/answer ID field=value … — answer a server's question (a URL-mode one: /answer ID once opened)",
    "/new": "start a clean conversation (clears taint)",
    "/help": "this list",
    "/quit": "leave the chat (terminal only)",
}


@dataclass(frozen=True)
class Command:
    """``arg`` is the command's argument (the approval id of ``/approve`` and ``/deny``; ``"all"`` for
    ``/stop all``, the emergency brake of spec §5.7); ``reason`` the rest of a ``/deny ID REASON`` line
    (the person's words for the model)."""

    name: str
    arg: str
    reason: str = ""


class CommandError(ValueError):
    """A line that starts with ``/`` but is not a valid command."""


def parse(line: str) -> Command | None:
    """``Command`` for a chat command, None for a message. Raises CommandError for a bad command."""
    text = line.strip()
    if not text.startswith("/"):
        return None
    name, _, arg = text.partition(" ")
    name = name.lower()
    arg = arg.strip()
    if name in ("/exit",):
        name = "/quit"
    if name not in COMMANDS:
        raise CommandError(f"unknown command {name} (try /help)")
    reason = ""
    if name == "/deny" and " " in arg:
        arg, _, reason = arg.partition(" ")
        reason = reason.strip()
    if name in ("/approve", "/deny") and (not arg or " " in arg):
        raise CommandError(f"{name} needs exactly one approval id, e.g. {name} a-1234567890")
    if name == "/answer" and not arg:
        raise CommandError("/answer needs a question id and the answer, e.g. /answer e-1234567890 party_size=4")
    if name == "/stop" and arg:
        # "/stop all" is the emergency brake (spec §5.7); a front end checks ``Command.arg == "all"``.
        if arg.lower() != "all":
            raise CommandError("/stop takes no argument, or all (every turn, and the jobs paused)")
        return Command(name, "all")
    if name not in ("/approve", "/deny", "/answer") and arg:
        raise CommandError(f"{name} takes no argument")
    return Command(name, arg, reason)


def answer_args(arg: str) -> tuple[str, list[str]]:
    """``/answer``'s argument as ``(question id, ["field=value", …])``; values may be quoted
    (``note="by the window"``). Raises CommandError for unbalanced quotes."""
    if arg.count('"') % 2 or arg.count("'") % 2:
        raise CommandError("/answer: a quote is not closed")
    words = [re.sub(r"""(["'])(.*?)\1""", r"\2", w) for w in re.findall(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""", arg)]
    return words[0], words[1:]


def help_text() -> str:
    return "\n".join(f"  {k:<9} {v}" for k, v in COMMANDS.items())
