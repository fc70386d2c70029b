"""What every chat channel shares (issue 13): who may talk, whose words, commands, approvals, sending.

A channel module (``telegram.py``, ``matrix.py``; later Slack, Signal…) subclasses
:class:`Channel` and implements the platform half: its receive loop (:meth:`Channel.run`), which
turns each platform update into an :class:`Inbound` and hands it to :meth:`Channel.receive`, and
five small sending methods (``send``, ``send_approval``, ``edit``, ``typing``, ``answer_press``).
Everything else is here, the same for every channel:

- **Only the person.** A sender other than the paired person is ignored: never answered, never
  a turn, logged with its id at most once a day. ``/pair CODE`` in a private chat pairs (a wrong
  code gets no reply). Group chats are refused unless the person enabled them; there only the
  person's messages start turns, and the other members' messages become untrusted context.
- **Once.** :meth:`Channel.receive` records the update's key in the same transaction as what it
  does (:meth:`Service.channel_update`): a turn, an approval answer, a stop. Slow work (running
  the turn, sending) happens after the commit, in tasks, so ``/stop`` never waits behind a turn.
- **Commands** (:mod:`palui.text.commands`) are handled here and never reach the model;
  answers go through the service's one door with ``answered_via`` = the channel's name.
- **Sending** goes through one ordered outbox per channel: a failed delivery is retried with
  backoff (``429 retry_after`` honoured by :meth:`Channel.retry_delay`), shown in ``/status``,
  and never blocks a turn; the inbox already holds every notice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

from palui.channels import views
from palui.channels.redaction import Redactor
from palui.errors import ApprovalError, PaluiError
from palui.text import commands
from palui.text.display import shown
from palui.types import TurnStatus

log = logging.getLogger("palui.channels")

Job = Callable[[], Awaitable[Any]]
ROOM_CONTEXT = 20  # other members' messages kept per enabled group chat, as untrusted context
DELIVERY_GIVE_UP_SECONDS = 900.0  # a delivery failing this long is dropped (the inbox has it)


@dataclass
class Quoted:
    """Text in a message that is not the person's own words: ``how`` is "forwarded", "replied to",
    "quoted" or "written in the room"; ``trusted`` only for the person's or Palui's own answers."""

    text: str
    author: str
    how: str
    trusted: bool = False


@dataclass
class Inbound:
    """One platform update, as a channel hands it to :meth:`Channel.receive`.

    ``key`` is the platform's id (Telegram ``update_id``, Matrix event id), ``seq`` its number
    where it has one. ``text`` holds only what the person typed; ``target`` the message replied
    or reacted to. A button press has ``press`` (its data) and ``press_id``; a reaction
    ``reaction`` ("approve" / "deny").
    """

    key: str
    chat: str
    sender: str
    sender_name: str
    private: bool
    seq: int | None = None
    text: str = ""
    quoted: list[Quoted] = field(default_factory=list)
    target: str | None = None
    press: str | None = None
    press_id: str | None = None
    reaction: str | None = None


class Retry(Exception):
    """A delivery that may succeed later: ``delay`` seconds to wait (None: the outbox's backoff)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class Channel:
    """A running chat channel of one stored channel row (see the module docstring).

    Args:
        svc: the service (:class:`palui.service.Service`); only its public methods are used.
        name: the channel's name (``telegram``, or ``--name``).
        redact: the process-wide redactor, which knows this channel's secrets.
    """

    kind: ClassVar[str] = ""
    title: ClassVar[str] = ""
    text_limit: ClassVar[int] = 4096
    how_to_answer: ClassVar[str] = ""

    def __init__(self, svc: Any, name: str, redact: Redactor) -> None:
        self.svc = svc
        self.name = name
        self.redact = redact
        self.outbox: asyncio.Queue[tuple[str, Job]] = asyncio.Queue()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.room_context: dict[str, collections.deque[Quoted]] = {}
        self.typing_chats: set[str] = set()

    @staticmethod
    def measure(text: str) -> int:
        return len(text)

    # -- the platform half (subclasses) ------------------------------------------------------------

    async def run(self) -> None:
        """Receive until cancelled, reconnecting by itself; call :meth:`receive` per update."""
        raise NotImplementedError

    async def send(self, chat: str, text: str, *, reply_to: str | None = None) -> list[str]:
        """Send ``text`` (already escaped for display, plain), split at the limit; return message refs."""
        raise NotImplementedError

    async def send_approval(self, chat: str, view: views.ApprovalView, a: dict[str, Any]) -> str:
        """Send the approval message with its buttons (or reaction hint); return its ref."""
        raise NotImplementedError

    async def edit(self, chat: str, ref: str, text: str) -> None:
        """Replace a sent message's text (and drop its buttons)."""
        raise NotImplementedError

    async def typing(self, chat: str) -> None:
        """Show "typing…" once (Telegram's lasts 5 s)."""

    async def answer_press(self, press_id: str, text: str) -> None:
        """Acknowledge a button press with a short text (Telegram's answerCallbackQuery)."""

    def retry_delay(self, exc: BaseException) -> float | None:
        """Seconds before retrying a failed delivery, None to give it up (a bad request)."""
        if isinstance(exc, Retry):
            return exc.delay if exc.delay is not None else 0.0  # 0: the outbox's backoff
        return None

    # -- receiving ----------------------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        self.svc.set_channel_state(self.name, self.redact(state))

    def spawn(self, job: Job) -> None:
        task = asyncio.ensure_future(job())
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: %s", self.name, self.redact(f"{type(task.exception()).__name__}: {task.exception()}"))

    def receive(self, inb: Inbound) -> bool:
        """Handle one update exactly once (see the module docstring). Returns False when it was seen
        before. Synchronous: the decision and its records commit together; sending follows in tasks."""
        followups: list[Job] = []
        try:
            with self.svc.channel_update(self.name, inb.key, inb.seq) as fresh:
                if not fresh:
                    log.info("%s: update %s seen before: dropped", self.name, inb.key)
                    return False
                followups = self._decide(inb)
        except Exception as e:  # recorded as failed; the person is told when it was theirs
            log.error("%s: update %s failed: %s", self.name, inb.key, self.redact(f"{type(e).__name__}: {e}"))
            if self._is_person(inb):
                self.reply(inb.chat, f"Palui could not handle that message: {shown(str(e), one_line=True)}")
            return True
        for job in followups:
            self.spawn(job)
        return True

    def _is_person(self, inb: Inbound) -> bool:
        ch = self.svc.channel(self.name)
        return bool(ch["person_id"]) and ch["person_id"] == inb.sender

    def _decide(self, inb: Inbound) -> list[Job]:
        ch = self.svc.channel(self.name)
        words = inb.text.strip()
        if words.lower().startswith("/pair"):
            if inb.private and not inb.press:
                self.svc.try_pair(self.name, words[5:].strip(), inb.sender, inb.sender_name, inb.chat)
            return []  # right: the pairing notice answers, everywhere; wrong: no reply at all
        if ch["person_id"] != inb.sender:
            if ch["allow_groups"] and not inb.private and ch["person_id"] and words:
                room = self.room_context.setdefault(inb.chat, collections.deque(maxlen=ROOM_CONTEXT))
                room.append(Quoted(words, f"{inb.sender_name} ({inb.sender})", "written in the room by"))
            if self.svc.note_stranger(self.name, inb.sender):
                log.warning("%s: ignored %s from %s (%s): not the paired person (logged once a day)", self.name,
                            "a button press" if inb.press else "a message", inb.sender, inb.chat)
            return []
        if not inb.private and not ch["allow_groups"]:
            if self.svc.note_stranger(self.name, f"chat:{inb.chat}"):
                log.warning("%s: ignored the person in group chat %s: groups are off (palui channels groups)",
                            self.name, inb.chat)
            return []
        if inb.press is not None:
            return self._press(inb)
        if inb.reaction is not None:
            return self._reaction(inb)
        return self._text(inb, words)

    # -- commands and messages ------------------------------------------------------------------------

    def reply(self, chat: str, text: str, kind: str = "reply") -> None:
        async def go() -> None:
            refs = await self.send(chat, text)
            self.svc.record_sent(self.name, chat, refs, kind)
        self.enqueue(f"{kind} to {chat}", go)

    def _text(self, inb: Inbound, words: str) -> list[Job]:
        target = self.svc.sent_message(self.name, inb.chat, inb.target) if inb.target else None
        if target and target["approval_id"]:
            head, _, rest = words.partition(" ")
            if head.lower() in ("/approve", "/deny") and not rest.strip().startswith("a-"):
                words = f"{head} {target['approval_id']} {rest}".strip()  # a reply to the approval names it
        try:
            cmd = commands.parse(words) if words.startswith("/") else None
        except commands.CommandError as e:
            self.reply(inb.chat, str(e))
            return []
        if cmd is not None:
            return self._command(inb, cmd)
        quoted = list(inb.quoted)
        room = self.room_context.pop(inb.chat, None)
        if room:
            quoted = [*room, *quoted]
        tid = self.svc.channel_message(self.name, inb.chat, words, [q.__dict__ for q in quoted])
        return [lambda: self._launch(inb.chat, tid)]

    def reply_quote(self, chat: str, ref: str | None, text: str, *, by_palui: bool, by_person: bool,
                    author: str) -> Quoted | None:
        """What a reply to message ``ref`` quotes: nothing for Palui's answer in this chat's current
        conversation (already in the model's context); the person's own words as trusted; every
        other text — another sender's, a notice, job result or webhook summary Palui delivered here
        (not part of this conversation) — as untrusted (issue 13 "Whose words")."""
        if not text.strip():
            return None
        if by_palui:
            m = self.svc.sent_message(self.name, chat, ref) if ref else None
            conv = self.svc.channel_conversation(self.name, chat)
            if m is not None and m["kind"] == "answer" and m["conversation_id"] == conv:
                return None
            what = m["kind"] if m else "message"
            return Quoted(text, f"Palui (a {what} delivered to this chat, not part of this conversation)",
                          "replied to")
        if by_person:
            return Quoted(text, "the person", "replied to", trusted=True)
        return Quoted(text, author, "replied to")

    async def _launch(self, chat: str, turn_id: str) -> None:
        launched = self.svc.launch(turn_id)
        if launched.cap or launched.behind:
            r = self.svc.turn_result(turn_id, [])
            why = r.get("queued_reason") or f"the {launched.cap} is reached"
            self.reply(chat, f"Queued: {shown(why, one_line=True)}.")
        await self._typing_while(chat, turn_id)

    async def _typing_while(self, chat: str, turn_id: str) -> None:
        """Resend "typing…" every 4 s while the turn is queued or running (issue 13)."""
        end = time.monotonic() + float(self.svc.settings.get("budgets.seconds")) + 30
        next_typing = 0.0
        while time.monotonic() < end:
            status = self.svc.turn_result(turn_id, [])["status"]
            if status not in ("running", "queued"):
                return
            if time.monotonic() >= next_typing:
                with contextlib.suppress(Exception):  # cosmetic: a failure is not worth a retry
                    await self.typing(chat)
                next_typing = time.monotonic() + 4.0
            await asyncio.sleep(0.25)

    def _command(self, inb: Inbound, cmd: commands.Command) -> list[Job]:
        chat = inb.chat
        if cmd.name == "/help":
            self.reply(chat, commands.help_text() + "\n  /pair     /pair CODE — pair this chat (palui channels pair)")
        elif cmd.name == "/quit":
            self.reply(chat, "/quit is for the terminal chat.")
        elif cmd.name == "/new":
            self.svc.channel_conversation(self.name, chat, new=True)
            self.reply(chat, "A new conversation starts with your next message.")
        elif cmd.name == "/status":
            self.reply(chat, status_text(self.svc.status()))
        elif cmd.name == "/stop":
            conv = self.svc.channel_conversation(self.name, chat)
            stopped = self.svc.stop(conversation=conv)
            self.reply(chat, f"Stopped {', '.join(stopped)}." if stopped else
                       "Nothing to stop: no turn is running or waiting.")
        else:
            return self._answer(chat, cmd.arg, cmd.name == "/approve", cmd.reason or None, press_id=None)
        return []

    def _answer(self, chat: str, approval_id: str, approve: bool, reason: str | None,
                press_id: str | None) -> list[Job]:
        """Answer through the one door (``answered_via`` = this channel), then resume the turn."""
        try:
            a = self.svc.answer_approval(approval_id, approve, via=self.name, reason=reason)
        except ApprovalError as e:
            turn = e.turn_id
            self._tell(chat, press_id, str(e))
            return [lambda: self._resume(turn)] if turn else []
        except PaluiError as e:
            self._tell(chat, press_id, str(e))
            return []
        word = "Approved" if a["status"] == "approved" else "Denied"
        self._tell(chat, press_id, f"{word} {a['id']} ({shown(a['tool'], one_line=True)}); the turn goes on.")
        turn = a["turn"]
        return [lambda: self._resume(turn), lambda: self.refresh_approvals()]

    def _tell(self, chat: str, press_id: str | None, text: str) -> None:
        if press_id is None:
            self.reply(chat, text)
        else:
            self.spawn(lambda: self._answer_press_safely(press_id, text))

    async def _answer_press_safely(self, press_id: str, text: str) -> None:
        try:
            await self.answer_press(press_id, text[:190])
        except Exception as e:  # a press answered late is only cosmetic
            log.warning("%s: answering a button press failed: %s", self.name, self.redact(str(e)))

    async def _resume(self, turn_id: str | None) -> None:
        if turn_id:
            self.svc.launch(turn_id, (TurnStatus.AWAITING_APPROVAL,))
            await self.refresh_approvals()

    def _press(self, inb: Inbound) -> list[Job]:
        parsed = views.parse_callback(inb.press or "")
        if parsed is None:
            self._tell(inb.chat, inb.press_id, "That button is not one of Palui's.")
            return []
        approval_id, fp, approve = parsed
        return self._checked_answer(inb, approval_id, fp, approve, inb.press_id)

    def _reaction(self, inb: Inbound) -> list[Job]:
        target = self.svc.sent_message(self.name, inb.chat, inb.target) if inb.target else None
        if target is None or not target["approval_id"] or target["kind"] != "approval":
            return []  # a reaction to anything else means nothing to Palui
        return self._checked_answer(inb, target["approval_id"], target["fingerprint"], inb.reaction == "approve",
                                    None)

    def _checked_answer(self, inb: Inbound, approval_id: str, fp: str, approve: bool,
                        press_id: str | None) -> list[Job]:
        a = self.svc.approval_or_none(approval_id)
        if a is None:
            self._tell(inb.chat, press_id, f"Refused: there is no approval {shown(approval_id, one_line=True)}.")
            return []
        if views.fingerprint(a) != fp:
            self._tell(inb.chat, press_id, f"Refused: that button does not match approval {a['id']} as it is now; "
                       "nothing was answered.")
            return []
        return self._answer(inb.chat, approval_id, approve, None, press_id)

    # -- sending ------------------------------------------------------------------------------------------

    def enqueue(self, what: str, job: Job) -> None:
        """Queue a delivery (never blocks; thread-safe callers use the manager's loop)."""
        self.outbox.put_nowait((what, job))

    async def deliver_loop(self) -> None:
        """Send the outbox in order; retry a failing delivery with backoff, give it up after 15 min."""
        while True:
            what, job = await self.outbox.get()
            first, attempt = time.monotonic(), 0
            while True:
                try:
                    await job()
                    if attempt:
                        self.svc.channel_failure(self.name, None)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as e:
                    text = self.redact(f"{what}: {type(e).__name__}: {e}")
                    self.svc.channel_failure(self.name, text)
                    delay = self.retry_delay(e)
                    if delay is None or time.monotonic() - first > DELIVERY_GIVE_UP_SECONDS:
                        log.error("%s: delivery given up: %s", self.name, text)
                        break
                    attempt += 1
                    delay = delay if delay > 0 else min(60.0, 0.5 * 2 ** attempt) * random.uniform(0.8, 1.2)
                    log.warning("%s: delivery failed, retrying in %.1f s: %s", self.name, delay, text)
                    await asyncio.sleep(delay)

    def deliver_notice(self, notice: Any) -> None:
        """A message on the person's channel (:class:`palui.types.Notice`) for this channel's person."""
        ch = self.svc.channel(self.name)
        if not ch["person_chat"]:
            return
        chat = ch["person_chat"]
        if notice.kind == "approval" and notice.approval_id:
            aid = notice.approval_id
            self.enqueue(f"approval {aid}", lambda: self._send_approval(chat, aid))
            return
        if notice.kind == "answer":
            return  # answers go to the chat whose conversation it is (the manager routes them)
        text = views.notice_text(notice.kind, notice.text)

        async def go() -> None:
            refs = await self.send(chat, text)
            self.svc.record_sent(self.name, chat, refs, notice.kind, turn_id=notice.turn_id,
                                 conversation_id=notice.conversation_id)
        self.enqueue(f"{notice.kind} notice", go)

    def deliver_answer(self, chat: str, turn_id: str) -> None:
        """The finished turn's reply to the chat it came from: one line per tool call, then the answer."""
        async def go() -> None:
            r = self.svc.turn_result(turn_id)
            refs = await self.send(chat, views.answer_text(r))
            self.svc.record_sent(self.name, chat, refs, "answer", turn_id=turn_id, conversation_id=r["conversation"])
        self.enqueue(f"answer of {turn_id}", go)

    async def _send_approval(self, chat: str, approval_id: str) -> None:
        a = self.svc.approval_or_none(approval_id)
        if a is None or a["status"] != "pending":
            return  # answered (or gone) before it could be shown
        view = views.approval_view(a, now=datetime.now(UTC), zone=self.svc.timezone(), limit=self.text_limit,
                                   measure=self.measure, how_to_answer=self.how_to_answer.format(id=a["id"]))
        for part in view.before:
            refs = await self.send(chat, part)
            self.svc.record_sent(self.name, chat, refs, "approval-args", turn_id=a["turn"], approval_id=a["id"])
        ref = await self.send_approval(chat, view, a)
        self.svc.record_sent(self.name, chat, [ref], "approval", turn_id=a["turn"], approval_id=a["id"],
                             conversation_id=a.get("conversation"), fingerprint=view.fingerprint, state="shown")

    async def refresh_approvals(self) -> None:
        """Edit approval messages whose approval was answered elsewhere, expired or was cancelled."""
        for m in self.svc.shown_approvals(self.name):
            a = self.svc.approval_or_none(m["approval_id"])
            if a is not None and a["status"] == "pending":
                continue
            if not self.svc.close_sent(m["id"]):
                continue
            text = views.outcome_text(a, self.name, TITLES) if a else f"Approval {m['approval_id']}: gone."
            self.enqueue(f"edit of approval {m['approval_id']}", functools.partial(self.edit, m["chat_id"], m["ref"],
                                                                                  text))


TITLES = {"telegram": "Telegram", "matrix": "Matrix"}


def status_text(s: dict[str, Any]) -> str:
    """``/status`` as a chat channel answers it (the same facts as the terminal's)."""
    caps = s["caps"]
    lines = [f"model: {s['model'] or 'none configured'}",
             f"tokens today: {s['tokens_today']} of {caps['daily_tokens']}",
             f"runs in the last hour: {s['runs_last_hour']} of {caps['runs_per_hour']}",
             (f"paused: {s['paused_reason']} until {s['paused_until']}" if s["paused"] else "not paused"),
             f"pending approvals: {s['pending_approvals']}",
             "connectors: " + ", ".join(f"{c['id']} {shown(c['state'], one_line=True)}" for c in s["connectors"])]
    for ch in s.get("channels", []):
        failure = f"; last delivery failure: {ch['last_failure']}" if ch.get("last_failure") else ""
        lines.append(f"channel {ch['name']}: {ch['state']}{failure}")
    return "\n".join(lines)
