"""One ``palui chat`` session (spec §8.2): a chat that stays live while a turn runs.

Input is read all the time. While a turn runs, chat commands act at once (``/stop`` ends the turn
within a second, ``/status`` answers at once) and other text is stored as the conversation's next
turn, which waits behind the running one (spec §8: one turn at a time) and is shown when its turn
comes. An approval's prompt ends when the approval is answered or cancelled anywhere (here, another
terminal, the web page, a chat app, ``palui stop``); the chat says where, and the turn's
continuation streams in. When the live service goes away, the chat says so and runs turns in this
process from then on; a message is said to be kept only when it was stored.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from palui.cli import render
from palui.cli.chat.asking import Asking, answered_words
from palui.cli.chat.backends import LocalBackend
from palui.cli.chat.questions import Questions
from palui.cli.chat.screen import Screen, Typed
from palui.cli.chat.view import View
from palui.cli.client import ServiceGone, StreamSink
from palui.errors import PaluiError
from palui.text.commands import ANSWERS, Command, CommandError, help_text, parse
from palui.text.display import shown
from palui.text.status import SERVICE_DOWN, status_lines
from palui.text.when import expiry

if TYPE_CHECKING:
    from palui.cli.chat.door import ChatDoor
    from palui.results import Conversation, StreamEvent, TurnResult
    from palui.service.api import Service

T = TypeVar("T")
YES = ("y", "yes")
NO = ("n", "no")
ALWAYS = ("a",)  # approve, and from now on the same (spec §5.9)
STOP = ("s",)  # deny and stop (spec §5.10)
WATCH_SECONDS = 1.0  # how often the chat checks that the live service still runs


class ChatSession:
    """The chat loop over a backend (this process or the live service) and a screen. It holds two
    collaborators: :class:`~palui.cli.chat.asking.Asking` (the approval the prompt asks about) and
    :class:`~palui.cli.chat.questions.Questions` (the servers' questions shown and waited for)."""

    def __init__(self, svc: Service, backend: ChatDoor, screen: Screen, model: str | None,
                 conversation: str, resumed: Conversation | None = None) -> None:
        self.svc = svc  # this process's service: the fallback, the person's zone
        self.backend: ChatDoor = backend
        self.screen = screen
        self.view = View(screen, svc.status.timezone())
        self.model = model
        self.conversation = conversation
        self.resumed = resumed
        self.inbox: asyncio.Queue[Typed] = asyncio.Queue()
        self.flow: asyncio.Task[None] | None = None

        self.queued: list[str] = []  # turns stored while another ran, followed in order
        self.new_after = False  # /new typed while a turn ran: a new conversation when it ends
        self.kept: list[str] = []  # lines typed after that /new, kept here until then
        self.leaving = False
        self._tasks: set[asyncio.Future[None]] = set()
        self.asking = Asking(screen, self.view, self.call, self.follow, self.say_error)
        self.questions = Questions(screen, self.view, self.inbox, self.call, self.follow, lambda: self.conversation,
                                   self._background, self._follow_other, self.say_error)
        self.view.on_question = self.questions.on_event

    # -- the loop ----------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self.flow is not None and not self.flow.done()

    async def run(self) -> None:
        reader = asyncio.create_task(self.screen.run_input(self.inbox.put_nowait))
        watchdog = asyncio.create_task(self.watch_service())
        try:
            await self.start()
            while True:
                if self.leaving and (not self.busy or self.asking.current is not None or self.questions.waiting):
                    break
                try:
                    typed = await asyncio.wait_for(self.inbox.get(), timeout=0.2)
                except TimeoutError:
                    continue
                if typed.text is None:
                    self.leave("input ended")
                elif typed.interrupt:
                    await self.interrupt()
                else:
                    await self.handle(typed)
        finally:
            watchdog.cancel()
            if self.asking.current is not None:
                aid = self.asking.current["id"]
                self.screen.line(f"[approval {aid} stays pending: palui approvals approve|deny {aid}, or palui chat "
                                 f"--conversation {self.conversation}]")
            for eid in self.questions.waiting:
                self.screen.line(f"[question {eid} stays pending: palui elicitations answer {eid} FIELD=VALUE…, "
                                 f"or palui chat --conversation {self.conversation}]")
            if self.flow is not None and not self.flow.done():
                self.flow.cancel()
                try:
                    await self.flow
                except (asyncio.CancelledError, Exception):
                    pass
            self.view.idle()
            await self.screen.stop_input(reader)  # after the last line: the screen writes it out first
            await self.backend.close()

    def leave(self, why: str) -> None:
        if self.busy and self.asking.current is None and not self.questions.waiting and not self.leaving:
            self.screen.line(f"({why}: leaving when the running turn ends; /stop ends it now)")
        self.leaving = True

    async def call(self, op: Callable[[ChatDoor], Awaitable[T]]) -> T:
        """``op(backend)``; if the live service went away, fall back to this process and do it here."""
        try:
            return await op(self.backend)
        except ServiceGone as e:
            await self.fall_back(e)
            return await op(self.backend)

    def say_error(self, e: Exception) -> None:
        self.screen.line(f"palui: {shown(str(e), one_line=True)}")

    # -- start -------------------------------------------------------------------------------------

    async def start(self) -> None:
        where = "" if self.backend.runs_here else f", turns run in {self.backend.where}"
        if self.resumed:
            r = self.resumed
            taint = (f" (tainted by {shown(r['taint_source'], one_line=True)}: writes ask first; /new starts clean)"
                     if r["tainted"] else "")
            self.screen.line(f"Palui chat — resumed conversation {r['id']}{taint}, {len(r['turns'])} turn(s) — "
                             f"model {self.model}{where}. /help for commands.")
        else:
            self.screen.line(f"Palui chat — model {self.model}, conversation {self.conversation}{where}. "
                             "/help for commands.")
        try:
            pending = await self.call(lambda b: b.approvals())
        except PaluiError as e:
            pending = []
            self.say_error(e)
        mine = [a for a in pending if a.get("conversation") == self.conversation]
        if pending:
            now = time.time()
            self.screen.line(f"{len(pending)} approval(s) pending:")
            for a in pending:
                here = " (this conversation)" if a in mine else f" (conversation {a.get('conversation')})"
                when = expiry(a["expires_at"], now, self.view.tz)
                self.screen.line(f"  {a['id']} {shown(a['tool'], one_line=True)}{here}, {when}")
            self.screen.line("  answer with /approve ID or /deny ID")
        if self.backend.runs_here:
            # Without a service, this chat takes up turns nobody runs (spec §5), labelled as resumed.
            for t in await self.svc.turns.resume_ready(on_turn=self._resumed_turn):
                self.view.outcome(t, label=f"[resumed turn {t['turn']}]")
        live = [t for t in (self.resumed["turns"] if self.resumed else []) if t["status"] in ("running", "queued",
                                                                                               "awaiting_approval")]
        if live:
            self.flow = asyncio.create_task(self.converse(None, first=live[0]["turn"],
                                                          rest=[t["turn"] for t in live[1:]]))

    def _resumed_turn(self, turn_id: str) -> StreamSink:
        """The event sink of a turn this chat takes up at its start, after a line that says which it is."""
        conv = self.svc.conversations.of_turn(turn_id)
        here = "this conversation" if conv == self.conversation else f"conversation {conv}"
        self.screen.line(f"[resuming turn {turn_id} of {here}: nobody else runs it]")
        return self.view.sink(turn_id)

    # -- input -------------------------------------------------------------------------------------

    async def handle(self, typed: Typed) -> None:
        line = (typed.text or "").strip()
        if not line:
            return
        try:
            cmd = parse(line)
        except CommandError as e:
            self.say_error(e)
            return
        if cmd is not None:
            await self.command(cmd)
            return
        word = line.lower()
        if word in YES + NO + ALWAYS + STOP:
            name = "/approve" if word in YES else "/always" if word in ALWAYS else \
                "/denystop" if word in STOP else "/deny"
            if self.asking.answer_typed(typed.asking, Command(name, typed.asking or "")):
                return
        if word in YES + NO + ALWAYS + STOP and self.busy:
            self.screen.line(f"('{shown(line, one_line=True)}' was not sent: no approval question was showing when "
                             "you typed it; answer once it shows, or /approve ID)")
            return
        if self.leaving:
            self.screen.line("(not sent: the chat is leaving)")
            return
        if self.new_after:
            self.kept.append(line)
            self.screen.line("[kept here, not stored yet: it goes to the new conversation when the running turn ends]")
            return
        self.screen.echo(line)
        if not self.busy:
            self.flow = asyncio.create_task(self.converse(line))
            return
        try:
            r = await self.call(lambda b: b.submit(line, self.conversation))
        except PaluiError as e:
            self.say_error(e)
            return
        self.queued.append(r["turn"])
        why = r.get("queued_reason") or "it starts when the running turn ends"
        self.screen.line(f"[stored as turn {r['turn']}, your next turn: {why}]")

    async def interrupt(self) -> None:
        if self.busy:
            await self.command(Command("/stop", ""))
        else:
            self.screen.line("(/quit or Ctrl-D to leave)")

    async def command(self, cmd: Command) -> None:
        try:
            await self._command(cmd)
        except PaluiError as e:
            self.say_error(e)

    async def _command(self, cmd: Command) -> None:
        if cmd.name == "/quit":
            self.leave("/quit")
        elif cmd.name == "/help":
            for line in help_text().split("\n"):
                self.screen.line(line)
        elif cmd.name == "/why":
            for line in self.view.why_lines():
                self.screen.line(line)
        elif cmd.name == "/status":
            s = await self.call(lambda b: b.status())
            s["model"] = self.model  # the model this chat uses, which --model may have set
            down = SERVICE_DOWN if self.backend.runs_here else None  # this process runs turns: no palui serve
            for line in status_lines(s, zone=self.view.tz, now=time.time(), service=down):
                self.screen.line(line)
            self.screen.line(f"turns run in: {self.backend.where}")
        elif cmd.name == "/new":
            if self.busy:
                self.new_after = True
                self.screen.line("[a new conversation starts when the running turn ends; /stop ends it now]")
            else:
                self.conversation = await self.call(lambda b: b.new_conversation())
                self.screen.line(f"new conversation {self.conversation}")
        elif cmd.name == "/stop" and cmd.arg == "all":  # the emergency brake (spec §5.7)
            ids = await self.call(lambda b: b.stop_all())
            self.screen.line((f"stopped {', '.join(ids)}" if ids else "nothing was running")
                             + "; jobs paused until palui jobs resume, the gateway until palui gateway resume")
        elif cmd.name == "/stop":
            ids = await self.call(lambda b: b.stop(self.conversation))
            self.screen.line(f"stopped {', '.join(ids)}" if ids else "nothing to stop")
        elif cmd.name == "/answer":
            await self.questions.answer(cmd.arg)
        elif cmd.name in ANSWERS:
            if cmd.arg.startswith("e-"):  # /deny ID declines a server's question (spec §8.2)
                self.questions.answered_here.add(cmd.arg)
            if self.asking.answer_typed(cmd.arg, cmd):
                return
            a = await self.call(lambda b: b.answer(cmd.arg, cmd.approves, cmd.reason or None, always=cmd.always,
                                                   confirm=cmd.confirm, stop=cmd.stop))
            self.screen.line(f"[{a['id']} {answered_words(cmd, a)}; its turn {a['turn']}]")
            if not self.busy and a.get("conversation") == self.conversation:
                self.flow = asyncio.create_task(self.converse(None, first=a["turn"]))
            elif a.get("conversation") != self.conversation:
                self._background(self._follow_other(a["turn"], a["id"]))

    async def _follow_other(self, turn_id: str, answered: str) -> None:
        """A turn of another conversation answered here goes on (in this process without a service): the
        chat shows the answered call's ✓/✗ line and how the turn ended, labelled, not its other events."""
        label = f"[turn {turn_id} of another conversation]"
        seen = {"asked": False}

        def on_event(e: StreamEvent) -> None:
            if e["type"] == "approval" and e.get("approval") == answered:
                seen["asked"] = True
            elif e["type"] == "tool_call" and seen["asked"]:
                seen["asked"] = False  # the call after its approval is the one answered
                self.screen.line(f"{label} {render.call_line(e).strip()}")

        try:
            r = await self.call(lambda b: b.follow(turn_id, 0, on_event))
            self.view.outcome(r, label=f"[turn {turn_id} of conversation {r['conversation']}]")
        except PaluiError as e:
            self.say_error(e)

    # -- a turn, start to settled --------------------------------------------------------------------

    async def converse(self, text: str | None, first: str | None = None, rest: list[str] | None = None) -> None:
        """Send ``text`` (or follow the turn ``first``), see it through its approvals to its end, then
        the turns stored meanwhile, in order."""
        self.queued.extend(rest or [])
        try:
            r = await self.send(text) if text is not None else await self.follow(first or "")
            await self.settle(r)
            while self.queued:
                tid = self.queued.pop(0)
                self.screen.line(f"[your next turn, {tid}:]")
                await self.settle(await self.follow(tid))
        except PaluiError as e:
            self.say_error(e)
        finally:
            self.view.idle()
            if self.new_after:
                self._background(self.start_kept())  # runs once this flow is done

    def _background(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def start_kept(self) -> None:
        """The /new typed while a turn ran, and what was typed after it."""
        self.new_after = False
        try:
            self.conversation = await self.call(lambda b: b.new_conversation())
        except PaluiError as e:
            self.say_error(e)
            return
        self.screen.line(f"new conversation {self.conversation}")
        kept, self.kept = self.kept, []
        for line in kept:
            await self.handle(Typed(line))

    async def send(self, text: str) -> TurnResult:
        started = time.time()
        sink = self.view.sink(None)
        try:
            return await self.backend.send(text, self.conversation, sink)
        except ServiceGone as e:
            await self.fall_back(e)
            tid = e.turn or self._stored_turn(text, started)
            if tid:
                self.screen.line(f"[your message was stored as turn {tid}: it goes on here]")
                return await self.follow(tid)
            self.screen.line("[the service had not stored your message: it runs here now]")
            return await self.backend.send(text, self.conversation, sink)

    def _stored_turn(self, text: str, since: float) -> str | None:
        """The turn of this conversation the service stored for ``text`` before it went away, if any."""
        try:
            turns = self.svc.conversations.get(self.conversation)["turns"]
        except PaluiError:
            return None
        found = [t for t in turns if t["input"] == text and t["created_at"] >= since - 1]
        return found[-1]["turn"] if found else None

    async def follow(self, turn_id: str) -> TurnResult:
        sink = self.view.sink(turn_id)
        return await self.call(lambda b: b.follow(turn_id, self.view.after.get(turn_id, 0), sink))

    async def settle(self, r: TurnResult) -> None:
        """Follow ``r``'s turn through its approvals and any wait behind another turn, then show how it ended."""
        while True:
            if r["status"] == "awaiting_approval" and r.get("pending_approvals"):
                r = await self.asking.ask(r)
            elif r["status"] == "awaiting_approval" and r.get("pending_elicitations"):
                r = await self.questions.wait(r)
            elif r["status"] in ("running", "awaiting_approval") or (r["status"] == "queued" and
                                                                     r.get("queued_behind")):
                r = await self.follow(r["turn"])
            else:
                break
        self.view.outcome(r)

    # -- the service -------------------------------------------------------------------------------

    async def watch_service(self) -> None:
        """Notice a live service that went away while the chat waits for input."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if not self.backend.alive():
                await self.fall_back(ServiceGone(f"{self.backend.where} is gone"))

    async def fall_back(self, e: ServiceGone) -> None:
        """From now on, turns run in this process (idempotent)."""
        if self.backend.runs_here:
            return
        old = self.backend
        self.backend = LocalBackend(self.svc, self.model)
        self.screen.line(f"[{old.where} went away: turns run in this process from now on; nothing you typed is "
                         "lost]")
        await old.close()
