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
    "/always": ("/always ID [ARG=any|prefix:TEXT|one-of:A,B …] [confirm] — approve, and from now on the same: "
                "this call in this context runs without asking (every argument pinned but those you widen)"),
    "/denystop": "/denystop ID [reason] — deny the call and stop the turn's tool use (the model answers without tools)",
    "/answer": "/answer ID field=value … — answer a server's question (a URL-mode one: /answer ID once opened)",
    "/new": "start a clean conversation (clears taint)",
    "/help": "this list",
    "/quit": "leave the chat (terminal only)",
}


@dataclass(frozen=True)
class Command:
    """``arg`` is the command's argument (the approval id of ``/approve``, ``/deny``, ``/always`` and
    ``/denystop``; ``"all"`` for ``/stop all``, the emergency brake of spec §5.7); ``reason`` the rest of a
    ``/deny ID REASON`` or ``/denystop ID REASON`` line (the person's words for the model); ``widen`` the arguments
    an ``/always`` widens (argument → ``any``, ``prefix:TEXT``, ``one-of:A,B``) and ``confirm`` its word for a
    destructive or unknown tool (spec §5.9)."""

    name: str
    arg: str
    reason: str = ""
    widen: tuple[tuple[str, str], ...] = ()
    confirm: bool = False

    @property
    def approves(self) -> bool:
        """An answer that approves (``/approve``, ``/always``)."""
        return self.name in ("/approve", "/always")

    @property
    def always(self) -> dict[str, str] | None:
        """The widenings of an ``/always`` (``{}``: every argument pinned), None for another command."""
        return dict(self.widen) if self.name == "/always" else None

    @property
    def stop(self) -> bool:
        """A ``/denystop``: the denial ends the tool use (spec §5.10)."""
        return self.name == "/denystop"


#: The commands that answer an approval, and take its id first.
ANSWERS = ("/approve", "/deny", "/always", "/denystop")


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
    if name in ("/deny", "/denystop") and " " in arg:
        arg, _, reason = arg.partition(" ")
        reason = reason.strip()
    if name == "/always":
        return _always(arg)
    if name in ANSWERS and (not arg or " " in arg):
        raise CommandError(f"{name} needs exactly one approval id, e.g. {name} a-1234567890")
    if name == "/answer" and not arg:
        raise CommandError("/answer needs a question id and the answer, e.g. /answer e-1234567890 party_size=4")
    if name == "/stop" and arg:
        # "/stop all" is the emergency brake (spec §5.7); a front end checks ``Command.arg == "all"``.
        if arg.lower() != "all":
            raise CommandError("/stop takes no argument, or all (every turn, and the jobs paused)")
        return Command(name, "all")
    if name not in (*ANSWERS, "/answer") and arg:
        raise CommandError(f"{name} takes no argument")
    return Command(name, arg, reason)


def _always(arg: str) -> Command:
    """``/always ID [ARG=HOW …] [confirm]`` (spec §5.9): a widening's text runs to the next space (a prefix or a
    list with spaces is given with ``palui approvals approve --always --widen`` or on the web page)."""
    words = arg.split()
    if not words or "=" in words[0]:
        raise CommandError("/always needs an approval id first, e.g. /always a-1234567890 body=any")
    widen: list[tuple[str, str]] = []
    confirm = False
    for w in words[1:]:
        if w.lower() == "confirm":
            confirm = True
            continue
        key, eq, how = w.partition("=")
        if not eq or not key or not how:
            raise CommandError(f"/always: '{w}' is not ARG=any, ARG=prefix:TEXT or ARG=one-of:A,B (or confirm)")
        widen.append((key, how))
    return Command("/always", words[0], widen=tuple(widen), confirm=confirm)


def answer_args(arg: str) -> tuple[str, list[str]]:
    """``/answer``'s argument as ``(question id, ["field=value", …])``; values may be quoted
    (``note="by the window"``). Raises CommandError for unbalanced quotes."""
    if arg.count('"') % 2 or arg.count("'") % 2:
        raise CommandError("/answer: a quote is not closed")
    words = [re.sub(r"""(["'])(.*?)\1""", r"\2", w) for w in re.findall(r"""(?:[^\s"']+|"[^"]*"|'[^']*')+""", arg)]
    return words[0], words[1:]


def help_text() -> str:
    return "\n".join(f"  {k:<9} {v}" for k, v in COMMANDS.items())
