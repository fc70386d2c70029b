"""A server's questions in ``palui chat`` (spec §7.8; docs/decisions/0125-questions-in-the-live-chat.md).

A question (MCP elicitation) is shown once, in the server's words escaped and marked as theirs,
with how to answer it: ``/answer ID field=value …`` (a URL-mode one: ``/answer ID`` once opened) or
``/deny ID``. Input stays live meanwhile, as it does for approvals:

- a question inside an open call (older MCP connections) arrives as a turn event while the turn
  runs; the call waits with its clock stopped until the question is answered anywhere;
- a 2026-07-28 server answers the call with its questions: the turn pauses, the chat shows them and
  waits until none is pending (answered here, on another terminal, the web page, a chat app, or
  expired), then the turn goes on (in this process without a service: taken up like an approval).

Every answer goes through the service's one door (``svc.elicitations.answer``, ``answered_via`` ``cli``).
A question's secret field (allowed by the person for its connector) is never typed on the ``/answer``
line: ``/answer ID`` asks for it at a hidden prompt (``*`` shown, kept out of the input history).
The chat leaves (``/quit``, end of input) while a paused turn's question waits, and says how to
answer it later; an older-era question lives in its call, so leaving waits for that turn as for any
running turn (``/stop`` ends it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from palui.cli.chat.screen import Screen, Typed
from palui.cli.chat.view import View, via_words
from palui.errors import ApprovalError, PaluiError
from palui.text.commands import CommandError, answer_args
from palui.text.display import shown
from palui.text.elicitation import fields, parse_pairs, parse_value, question_text
from palui.text.secret_fields import secret_fields

if TYPE_CHECKING:
    from palui.cli.chat.door import OnBackend
    from palui.results import Elicitation, ElicitationEvent, TurnElicitation, TurnResult

POLL_SECONDS = 1.0  # how often a paused turn's questions are looked at while the chat waits for them


class Questions:
    """The servers' questions a chat session shows and waits for.

    Args:
        screen, view: where a question and its outcome are shown; ``inbox``: the lines typed (a hidden field
            is read from it).
        call: runs an operation on the chat's backend (:class:`~palui.cli.chat.door.OnBackend`).
        follow: follows a turn on once its questions are answered (the session's).
        conversation: the session's current conversation (it changes with ``/new``).
        background: runs a coroutine beside the session's flow; ``follow_other(turn_id, answered_id)``: a turn
            of another conversation, answered here, goes on (both the session's).
        say_error: shows a refusal.

    Attributes:
        waiting: the paused turn's questions the chat waits for (spec §7.8).
    """

    def __init__(self, screen: Screen, view: View, inbox: asyncio.Queue[Typed], call: OnBackend,
                 follow: Callable[[str], Awaitable[TurnResult]], conversation: Callable[[], str],
                 background: Callable[[Awaitable[None]], None], follow_other: Callable[[str, str], Awaitable[None]],
                 say_error: Callable[[Exception], None]) -> None:
        self.screen = screen
        self.view = view
        self.inbox = inbox
        self.call = call
        self.follow = follow
        self.conversation = conversation
        self.background = background
        self.follow_other = follow_other
        self.say_error = say_error
        self.waiting: list[str] = []
        self._shown: set[str] = set()
        self.answered_here: set[str] = set()  # answered in this chat: no "was answered on …" line for them

    async def question(self, eid: str) -> Elicitation:
        """The question ``eid`` as it stands now (``ElicitationsPart.get``), wherever turns run."""
        return await self.call(lambda b: b.elicitation(eid))

    def on_event(self, e: ElicitationEvent) -> None:
        """A pending ``elicitation`` event of a turn this chat shows: the question, looked up and shown."""
        if e.get("elicitation") and e["elicitation"] not in self._shown:
            self.background(self.show(e["elicitation"]))

    async def show(self, eid: str, q: TurnElicitation | None = None) -> None:
        if eid in self._shown:
            return
        self._shown.add(eid)
        try:
            q = q if q is not None and "schema" in q else await self.question(eid)
        except PaluiError as err:
            self.say_error(err)
            return
        if q["status"] != "pending":
            return
        self.view.idle()
        for line in question_text(q).split("\n"):
            self.screen.line(line)
        self.screen.set_status(f"waiting for your answer to {eid}")

    async def answer(self, arg: str) -> None:
        """``/answer ID field=value …`` through the one door."""
        try:
            eid, pairs = answer_args(arg)
            q = await self.question(eid)
            secret = secret_fields(q["schema"]) if q["mode"] == "form" else {}
            named = sorted({p.partition("=")[0].strip() for p in pairs} & set(secret))
            if named:
                raise ValueError(f"{', '.join(named)} asks for a secret: it is not typed on the /answer line; type "
                                 f"/answer {eid} and Palui asks for it hidden")
            content = parse_pairs(q["schema"], pairs) if q["mode"] == "form" else None
            for f in [f for f in fields(q["schema"]) if f.name in secret]:
                value = await self.read_hidden(f.name)
                if value is None:
                    self.screen.line(f"[{eid} not answered]")
                    return
                if value.strip():
                    content = {**(content or {}), f.name: parse_value(f, value)}
        except (CommandError, ValueError) as err:
            self.say_error(err)
            return
        self.answered_here.add(eid)
        try:
            q = await self.call(lambda b: b.answer_elicitation(eid, "accept", content))
        except ApprovalError as err:  # expired, cancelled or answered meanwhile: the turn shows what happened
            self.say_error(err)
            return
        self.screen.line(f"[{q['id']} answered: the turn goes on]")
        if q.get("conversation") != self.conversation() and q["era"] == "input_required":
            self.background(self.follow_other(q["turn"], q["id"]))

    async def read_hidden(self, name: str) -> str | None:
        """The next line typed, hidden (a secret field ``name``); None when the input ended or on Ctrl-C."""
        before = self.screen.prompt
        self.screen.hidden = True
        self.screen.set_prompt(f"{name} (hidden, Enter alone: left out)> ")
        try:
            typed = await self.inbox.get()
        finally:
            self.screen.hidden = False
            self.screen.set_prompt(before)
        return None if typed.text is None or typed.interrupt else typed.text

    async def wait(self, r: TurnResult) -> TurnResult:
        """A turn paused by a 2026-07-28 server's questions: show them, wait until none is pending
        (answered anywhere, or expired: a decline), then follow the turn on."""
        pending = list(r["pending_elicitations"])
        for q in pending:
            await self.show(q["id"], q)
        self.waiting = [q["id"] for q in pending]
        try:
            while self.waiting:
                await asyncio.sleep(POLL_SECONDS)
                still = []
                for eid in self.waiting:
                    q = await self.question(eid)
                    if q["status"] == "pending":
                        still.append(eid)
                    elif eid not in self.answered_here:
                        how = (f"{q['status']} on {shown(via_words(q['answered_via']), one_line=True)}"
                               if q.get("answered_via") else q["status"])
                        self.screen.line(f"[question {eid} was {how}: the turn goes on]")
                self.waiting = still
        finally:
            self.waiting = []
        self.screen.set_status("the turn goes on")
        return await self.follow(r["turn"])
