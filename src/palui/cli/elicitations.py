"""A server's question to the person on the command line (spec §7.8, §8).

- ``palui elicitations list|show|answer``: the questions that wait, and answering one from any
  terminal (through the live service when one runs, else here, resuming the turn here).
- ``palui run`` / ``palui chat`` ask the questions of their own turn on their terminal: a question
  that arrives inside an open call (older MCP connections) while the turn runs, and the questions
  a 2026-07-28 server answered the call with. Without a terminal (stdin is not one) they decline.

Every text of the server is shown through :mod:`palui.text.display` (escaped, marked as the
server's words); URL mode shows the full URL and its host and never opens it.

A field that asks for a secret (:mod:`palui.text.secret_fields`; asked only when the person allowed
its connector to) is read with hidden input (no echo), on the terminal or, without one, from standard
input, one line per secret field: never from the command line (``palui elicitations answer ID
password=…`` is refused: the shell history and ``ps`` would show it).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import click

from palui.cli.common import emit_json, fail, group, service, table
from palui.errors import PaluiError, UsageError
from palui.text.display import shown
from palui.text.elicitation import Field, field_line, fields, parse_pairs, parse_value, question_text
from palui.text.secret_fields import secret_fields

if TYPE_CHECKING:
    import asyncio

    from palui.results import Elicitation, TurnElicitation, TurnEvent, TurnResult

elicitations_app = group("elicitations", "Questions MCP servers ask you: list, show, answer.")

Answer = tuple[str, dict[str, Any] | None]  # (action, content)


def has_terminal() -> bool:
    return sys.stdin.isatty()


def _say(text: str) -> None:
    click.echo(text, err=True)


def _read(prompt: str) -> str | None:
    _say(prompt.rstrip())
    try:
        line = sys.stdin.readline()
    except (OSError, ValueError):
        return None
    return None if line == "" else line.rstrip("\n")


def read_hidden(f: Field) -> str | None:
    """A secret field's value: typed without echo on the terminal, else the next line of standard input
    (None at its end)."""
    import getpass

    if sys.stdin.isatty():
        try:
            return getpass.getpass(f"  {field_line(f)} (hidden: nothing shows as you type)\n  {f.name}> ",
                                   stream=sys.stderr)
        except (EOFError, OSError):
            return None
    line = sys.stdin.readline()
    return None if line == "" else line.rstrip("\n")


def ask_on_terminal(e: TurnElicitation) -> Answer:
    """Put question ``e`` (the ``ElicitationsPart.get`` shape) to the person on this terminal.
    Returns ``(action, content)``; end of input is a decline."""
    _say(question_text(e))
    if e["mode"] == "url":
        word = (_read("Did you open it? [y = accept, n = decline, c = cancel]") or "n").strip().lower()
        return ({"y": "accept", "yes": "accept", "c": "cancel", "cancel": "cancel"}.get(word, "decline"), None)
    word = (_read("Answer it? [Y/n, c = cancel]") or "n").strip().lower()
    if word in ("n", "no"):
        return "decline", None
    if word in ("c", "cancel"):
        return "cancel", None
    content: dict[str, Any] = {}
    secret = secret_fields(e.get("schema"))
    for f in fields(e.get("schema")):
        while True:
            line = read_hidden(f) if f.name in secret else _read(f"  {field_line(f)}\n  {f.name}>")
            if line is None:
                return "decline", None
            if not line.strip():
                if f.required and not f.has_default:
                    _say(f"  {f.name} is required")
                    continue
                break  # the schema's default (if any) applies
            try:
                content[f.name] = parse_value(f, line)
                break
            except ValueError as err:
                _say(f"  {err}")
    return "accept", content


async def ask_on_terminal_async(e: TurnElicitation) -> Answer:
    """:func:`ask_on_terminal` in a daemon thread (the event loop goes on; an unanswered prompt never
    keeps the process alive)."""
    import asyncio
    import threading

    loop = asyncio.get_running_loop()
    done: asyncio.Future[Answer] = loop.create_future()

    def settle(out: Answer | None, err: BaseException | None) -> None:
        if done.done():
            return
        if err is not None:
            done.set_exception(err)
        else:
            done.set_result(out or ("decline", None))

    def work() -> None:
        try:
            out = ask_on_terminal(e)
        except BaseException as err:  # the prompt failed: report it to the loop
            loop.call_soon_threadsafe(settle, None, err)
        else:
            loop.call_soon_threadsafe(settle, out, None)

    threading.Thread(target=work, daemon=True, name="palui-question").start()
    return await done


class TerminalQuestions:
    """Asks the questions of this CLI's own turns. ``answer(id, action, content)`` is the door
    (in-process ``svc.elicitations.answer`` or the live service's route); ``lookup(id)`` reads one."""

    def __init__(self, answer: Callable[[str, str, dict[str, Any] | None], Any],
                 lookup: Callable[[str], Elicitation], in_loop: bool) -> None:
        self.answer = answer
        self.lookup = lookup
        self.in_loop = in_loop
        self.tasks: set[asyncio.Task[None]] = set()

    def decide(self, e: TurnElicitation) -> Answer:
        if not has_terminal():
            _say(f"[question {e['id']} from {e['connector']} declined: no terminal to ask on]")
            return "decline", None
        return ask_on_terminal(e)

    def _give(self, eid: str, action: str, content: dict[str, Any] | None) -> None:
        try:
            self.answer(eid, action, content)
        except UsageError as err:
            _say(f"palui: {err}; the question is declined")
            self.answer(eid, "decline", None)
        except PaluiError as err:  # expired, cancelled meanwhile: the turn goes on by itself
            _say(f"palui: {err}")

    def on_event(self, ev: TurnEvent) -> None:
        """A turn event: a question that waits inside an open call is asked now."""
        if ev["type"] != "elicitation" or ev.get("status") != "pending" or ev.get("era") != "in_call":
            return
        e = self.lookup(ev["elicitation"])
        if not self.in_loop:
            self._give(e["id"], *self.decide(e))
            return

        async def later() -> None:
            action, content = await ask_on_terminal_async(e) if has_terminal() else self.decide(e)
            self._give(e["id"], action, content)

        import asyncio

        task = asyncio.get_running_loop().create_task(later())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def settle(self, r: TurnResult, answer_and_go_on: Callable[[str, str, dict[str, Any] | None],
                                                                       Awaitable[TurnResult]]) -> TurnResult:
        """A turn paused by a 2026-07-28 server: ask (or decline) its questions, then let it go on."""
        while r.get("status") == "awaiting_approval" and r.get("pending_elicitations"):
            pending = r["pending_elicitations"]
            answers = []
            for e in pending:
                answers.append(await ask_on_terminal_async(e) if has_terminal() else self.decide(e))
            for e, (action, content) in zip(pending[:-1], answers[:-1], strict=True):
                self._give(e["id"], action, content)
            action, content = answers[-1]
            try:
                r = await answer_and_go_on(pending[-1]["id"], action, content)
            except UsageError as err:
                _say(f"palui: {err}; the question is declined")
                r = await answer_and_go_on(pending[-1]["id"], "decline", None)
        return r


# -- palui elicitations ... ----------------------------------------------------------------------------


@elicitations_app.command("list")
@click.option("--all", "all_", is_flag=True, help="Include answered, expired and cancelled.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def elicitations_list(all_: bool, as_json: bool) -> None:
    """List the questions MCP servers asked you that wait for an answer (with --all, every one)."""
    rows = service().elicitations.list(None if all_ else "pending")
    if as_json:
        return emit_json(rows)
    if not rows:
        click.echo("no questions waiting" if not all_ else "no questions")
        return
    table([[e["id"], e["status"], e["connector"], e["mode"], e["message"][:80], (e["expires_at"] or "")[:19]]
           for e in rows],
          ["ID", "STATUS", "CONNECTOR", "MODE", "MESSAGE (the server's words)", "EXPIRES"])


@elicitations_app.command("show")
@click.argument("elicitation_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def elicitations_show(elicitation_id: str, as_json: bool) -> None:
    """One question with its fields (or its URL), in the server's words, escaped."""
    e = service().elicitations.get(elicitation_id)
    if as_json:
        return emit_json(e)
    click.echo(question_text(e))
    click.echo(f"status: {e['status']}" + (f" ({shown(e['reason'], one_line=True)})" if e["reason"] else ""))


@elicitations_app.command("answer")
@click.argument("elicitation_id")
@click.argument("pairs", nargs=-1, required=False, metavar="[FIELD=VALUE]...", help="The answer, field by field.")
@click.option("--decline", is_flag=True, help="Decline the question.")
@click.option("--cancel", is_flag=True, help="Dismiss it without a choice.")
@click.option("--json", "as_json", is_flag=True, help="Print the turn's result as JSON.")
def elicitations_answer(elicitation_id: str, pairs: tuple[str, ...], decline: bool, cancel: bool,
                        as_json: bool) -> None:
    """Answer a question (accept with FIELD=VALUE pairs; a URL-mode question: you opened the page)."""
    from palui.cli import render
    from palui.cli.live import live_service, run_async

    if decline and cancel:
        fail("give --decline or --cancel, not both", 2)
    svc = service()
    action = "decline" if decline else "cancel" if cancel else "accept"
    content = None
    if action == "accept":
        e = svc.elicitations.get(elicitation_id)
        secret = secret_fields(e["schema"]) if e["mode"] == "form" else {}
        named = sorted({p.partition("=")[0].strip() for p in pairs} & set(secret))
        if named:
            raise UsageError(f"{', '.join(named)} asks for a secret: it is never taken from the command line (the "
                             f"shell history and ps would show it); leave it out and type it at the hidden prompt, "
                             "or give it on standard input")
        try:
            content = parse_pairs(e["schema"], pairs or []) if e["mode"] == "form" else None
        except ValueError as err:
            raise UsageError(str(err)) from None
        for f in [f for f in fields(e["schema"]) if f.name in secret]:
            value = read_hidden(f)
            if value is None:
                raise UsageError(f"no value for {f.name}: the input ended")
            if value.strip():
                try:
                    content = {**(content or {}), f.name: parse_value(f, value)}
                except ValueError as err:
                    raise UsageError(str(err)) from None
    printer = None if as_json else render.Printer(tz=svc.status.timezone())
    client = live_service(svc)
    if client:
        r = client.answer_elicitation(elicitation_id, action, content, printer)
    else:
        r = run_async(svc, svc.elicitations.answer_and_resume(elicitation_id, action, content, "cli", printer))
    if as_json:
        emit_json(r)
    else:
        click.echo(f"{elicitation_id}: {action}")
        if r.get("status") not in ("running", None) and printer is not None:
            printer.outcome(r)
