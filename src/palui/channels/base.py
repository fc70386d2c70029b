"""What every chat channel shares (spec §8.3): who may talk, whose words, commands, approvals, sending.

A channel module (``telegram.py``, ``matrix.py``; later Slack, Signal…) subclasses
:class:`Channel` and implements the platform half: its receive loop (:meth:`Channel.run`), which
turns each platform update into an :class:`Inbound` and hands it to :meth:`Channel.receive`, and
four small sending methods (``send_message``, ``edit``, ``typing``, ``answer_press``).
Everything else is here, the same for every channel:

- **Only the person.** A sender other than the paired person is ignored: never answered, never
  a turn, logged with its id at most once a day. ``/pair CODE`` in a private chat pairs (a wrong
  code gets no reply). Group chats are refused unless the person enabled them; there only the
  person's messages start turns, and the other members' messages become untrusted context.
- **Once.** :meth:`Channel.receive` records the update's key in the same transaction as what it
  does (:meth:`ChannelUpdatesPart.process`): a turn, an approval answer, a stop. Slow work (running
  the turn, sending) happens after the commit, in tasks, so ``/stop`` never waits behind a turn.
- **Commands** (:mod:`palui.text.commands`) are handled here and never reach the model;
  answers go through the service's one door with ``answered_via`` = the channel's name.
- **Sending** goes through the channel's durable outbox (:mod:`.outbox`): a reply to a command is
  written with the update that asked for it, sent in order, retried with backoff (``429
  retry_after`` honoured by :meth:`Channel.retry_delay`), shown in ``/status`` while it fails, and
  never blocks a turn. ``/status`` names the pending approvals; ``/approvals`` sends them again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Mapping
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from palui.channels import views
from palui.channels.outbox import SHOWN, TITLES, Outbox
from palui.channels.platform import ChannelPlatform, Inbound, Job, Quoted, Retry
from palui.channels.redaction import Redactor
from palui.errors import ApprovalError, PaluiError, UsageError
from palui.text import commands
from palui.text.display import shown
from palui.text.status import status_lines
from palui.types import TurnStatus

if TYPE_CHECKING:
    from palui.service.api import Service

__all__ = ["TITLES", "Channel", "ChannelPlatform", "Inbound", "Quoted", "Retry", "status_text"]

log = logging.getLogger("palui.channels")

ROOM_CONTEXT = 20  # other members' messages kept per enabled group chat, as untrusted context
APPROVALS_HELP = "the pending approvals' messages again, with their buttons (chat channels)"


class Channel(Outbox):
    """A running chat channel (see the module docstring): receiving, commands and answers.

    Args:
        svc: the service (:class:`palui.service.api.Service`): its parts.
        name: the channel's name (``telegram``, or ``--name``).
        redact: the process-wide redactor, which knows this channel's secrets.
    """

    def __init__(self, svc: Service, name: str, redact: Redactor) -> None:
        super().__init__(svc, name, redact)
        self.room_context: dict[str, collections.deque[Quoted]] = {}

    #: What the person is told about a message with nothing Palui reads (a sticker, a photo without caption).
    unread_reply = "Palui reads text messages only: send your words as text."
    edit_reply = "Edits are not read: send a new message instead."

    def receive(self, inb: Inbound) -> bool:
        """Handle one update exactly once (see the module docstring). Returns False when it was seen
        before. Synchronous: the decision and its records commit together; sending follows in tasks."""
        if inb.edit_of is not None or (not inb.text and not inb.quoted and inb.press is None
                                       and inb.reaction is None):
            return self._nothing_to_read(inb)
        followups: list[Job] = []
        try:
            with self.svc.channel_updates.process(self.name, inb.key, inb.seq) as fresh:
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

    def _nothing_to_read(self, inb: Inbound) -> bool:
        """An edit or a message without text: recorded once; the person is told in a private chat, about an
        edit once per message edited (a message edited five times is one reply, spec §8.3)."""
        with self.svc.channel_updates.process(self.name, inb.key, inb.seq) as fresh:
            if not fresh:
                return False
            if self._is_person(inb) and inb.private:
                if inb.edit_of is None:
                    self.reply(inb.chat, self.unread_reply)
                elif self.svc.channel_updates.mark(self.name, f"edit:{inb.chat}:{inb.edit_of}", "edit told"):
                    self.reply(inb.chat, self.edit_reply)
        return True

    def _is_person(self, inb: Inbound) -> bool:
        ch = self.svc.channels.get(self.name)
        return bool(ch["person_id"]) and ch["person_id"] == inb.sender

    def _decide(self, inb: Inbound) -> list[Job]:
        ch = self.svc.channels.get(self.name)
        words = inb.text.strip()
        head, _, rest = words.partition(" ")
        if head.lower() == "/pair":
            if inb.private and not inb.press:
                self.svc.channels.try_pair(self.name, rest.strip(), inb.sender, inb.sender_name, inb.chat)
            return []  # right: the pairing notice answers, everywhere; wrong: no reply at all
        if ch["person_id"] != inb.sender:
            if ch["allow_groups"] and not inb.private and ch["person_id"] and words:
                room = self.room_context.setdefault(inb.chat, collections.deque(maxlen=ROOM_CONTEXT))
                room.append(Quoted(words, f"{inb.sender_name} ({inb.sender})", "written in the room by"))
            if self.svc.channels.note_stranger(self.name, inb.sender):
                log.warning("%s: ignored %s from %s (%s): not the paired person (logged once a day)", self.name,
                            "a button press" if inb.press else "a message", inb.sender, inb.chat)
            return []
        if not inb.private and not ch["allow_groups"]:
            if self.svc.channels.note_stranger(self.name, f"chat:{inb.chat}"):
                log.warning("%s: ignored the person in group chat %s: groups are off (palui channels groups)",
                            self.name, inb.chat)
            return []
        if inb.press is not None:
            return self._press(inb)
        if inb.reaction is not None:
            return self._reaction(inb)
        return self._text(inb, words)

    # -- commands and messages ------------------------------------------------------------------------

    def _text(self, inb: Inbound, words: str) -> list[Job]:
        target = self.svc.outbox.sent_message(self.name, inb.chat, inb.target) if inb.target else None
        if target and target["approval_id"]:
            head, _, rest = words.partition(" ")
            if head.lower() in commands.ANSWERS and not rest.strip().startswith("a-"):
                words = f"{head} {target['approval_id']} {rest}".strip()  # a reply to the approval names it
        if words.lower() == "/approvals":  # a channel's own command: the buttons again (spec §8.2)
            n = self.resend_approvals(inb.chat)
            if not n:
                self.reply(inb.chat, "No approval is pending.")
            return []
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
        try:
            tid = self.svc.channel_updates.message(self.name, inb.chat, words, [q.__dict__ for q in quoted])
        except UsageError as e:  # too long (limits.message_chars): refused, nothing stored (spec §8.1)
            self.reply(inb.chat, str(e))
            return []
        return [lambda: self._launch(inb.chat, tid)]

    def reply_quote(self, chat: str, ref: str | None, text: str, *, by_palui: bool, by_person: bool,
                    author: str) -> Quoted | None:
        """What a reply to message ``ref`` quotes: nothing for Palui's answer in this chat's current
        conversation (already in the model's context); the person's own words as trusted; every
        other text — another sender's, a notice, job result or webhook summary Palui delivered here
        (not part of this conversation) — as untrusted (spec §8.3; docs/decisions/0060-which-quotes-taint.md)."""
        if not text.strip():
            return None
        if by_palui:
            m = self.svc.outbox.sent_message(self.name, chat, ref) if ref else None
            conv = self.svc.channel_updates.conversation(self.name, chat)
            if m is not None and m["kind"] == "answer" and m["conversation_id"] == conv:
                return None
            what = m["kind"] if m else "message"
            return Quoted(text, f"Palui (a {what} delivered to this chat, not part of this conversation)",
                          "replied to")
        if by_person:
            return Quoted(text, "the person", "replied to", trusted=True)
        return Quoted(text, author, "replied to")

    async def _launch(self, chat: str, turn_id: str) -> None:
        launched = self.svc.turns.launch(turn_id)
        if launched.cap or launched.behind:
            r = self.svc.turns.result(turn_id, [])
            why = r.get("queued_reason") or f"the {launched.cap} is reached"
            self.reply(chat, f"Queued: {shown(why, one_line=True)}.")
        await self._typing_while(chat, turn_id)

    async def _typing_while(self, chat: str, turn_id: str) -> None:
        """Resend "typing…" every 4 s while the turn is queued or running (spec §8.3)."""
        end = time.monotonic() + self.svc.settings.budgets.seconds + 30
        next_typing = 0.0
        while time.monotonic() < end:
            if self.svc.turns.status(turn_id) not in ("running", "queued"):
                return
            if time.monotonic() >= next_typing:
                with contextlib.suppress(Exception):  # cosmetic: a failure is not worth a retry
                    await self.typing(chat)
                next_typing = time.monotonic() + 4.0
            await asyncio.sleep(0.25)

    def _command(self, inb: Inbound, cmd: commands.Command) -> list[Job]:
        chat = inb.chat
        if cmd.name == "/help":
            self.reply(chat, commands.help_text() + f"\n  {'/approvals':<9} {APPROVALS_HELP}"
                       "\n  /pair     /pair CODE — pair this chat (palui channels pair)")
        elif cmd.name == "/quit":
            self.reply(chat, "/quit is for the terminal chat.")
        elif cmd.name == "/new":
            self.svc.channel_updates.conversation(self.name, chat, new=True)
            self.reply(chat, "A new conversation starts with your next message.")
        elif cmd.name == "/status":
            self.reply(chat, status_text(self.svc.status.get(), self.svc.status.timezone()))
        elif cmd.name == "/why":
            self.reply(chat, self._why(self.svc.channel_updates.conversation(self.name, chat)))
        elif cmd.name == "/stop" and cmd.arg == "all":  # the emergency brake (spec §5.7)
            stopped = self.svc.brake.stop_all(self.name)["stopped"]
            self.reply(chat, (f"Stopped {', '.join(stopped)}." if stopped else "No turn was running.")
                       + " Jobs are paused until palui jobs resume, the gateway until palui gateway resume.")
        elif cmd.name == "/stop":
            conv = self.svc.channel_updates.conversation(self.name, chat)
            stopped = self.svc.turns.stop(conversation=conv)
            self.reply(chat, f"Stopped {', '.join(stopped)}." if stopped else
                       "Nothing to stop: no turn is running or waiting.")
        elif cmd.name == "/answer":
            return self._answer_question(chat, cmd.arg)
        else:
            return self._answer(chat, cmd.arg, cmd.approves, cmd.reason or None, press_id=None, always=cmd.always,
                                confirm=cmd.confirm, stop=cmd.stop)
        return []

    def _answer_question(self, chat: str, arg: str) -> list[Job]:
        """``/answer ID field=value …``: a server's question, through its one door (spec §7.8)."""
        from palui.text.elicitation import parse_pairs

        try:
            qid, pairs = commands.answer_args(arg)
            q = self.svc.elicitations.get(qid)
            content = parse_pairs(q["schema"], pairs) if q["mode"] == "form" else None
            q = self.svc.elicitations.answer(qid, "accept", content, via=self.name)
        except ApprovalError as e:
            self.reply(chat, str(e))
            went = e.turn_id
            return [lambda: self._resume(went)] if went else []
        except (PaluiError, ValueError) as e:
            self.reply(chat, str(e))
            return []
        self.reply(chat, f"Answered {q['id']} ({shown(q['connector'], one_line=True)}); the turn goes on.")
        turn = q["turn"]
        return [lambda: self._resume(turn)]

    def _why(self, conversation: str) -> str:
        """``/why`` (spec §8.2): each tool call of the conversation's latest turn that made any, with its reason."""
        for t in reversed(self.svc.conversations.get(conversation)["turns"]):
            calls = [e for e in t["events"] if e["type"] == "tool_call"]
            if calls:
                lines = [f"{i}. {shown(e['tool'], one_line=True)}: {shown(e.get('reason', ''), one_line=True)}"
                         for i, e in enumerate(calls, 1)]
                return "\n".join([f"Tool calls of turn {t['turn']}:", *lines])
        return "No tool calls yet in this conversation."

    def _answer(self, chat: str, approval_id: str, approve: bool, reason: str | None,
                press_id: str | None, *, always: dict[str, str] | None = None, confirm: bool = False,
                stop: bool = False) -> list[Job]:
        """Answer through the one door (``answered_via`` = this channel), then resume the turn. ``always``:
        approve, and from now on the same (spec §5.9); ``stop``: deny and stop (spec §5.10)."""
        try:
            a = self.svc.approvals.answer(approval_id, approve, via=self.name, reason=reason, always=always,
                                          confirm=confirm, stop=stop)
        except ApprovalError as e:
            turn = e.turn_id
            self._tell(chat, press_id, str(e))
            return [lambda: self._resume(turn)] if turn else []
        except PaluiError as e:
            self._tell(chat, press_id, str(e))
            return []
        word = "Approved" if a["status"] == "approved" else "Denied"
        then = "the turn goes on"
        if made := a.get("rule_made"):
            then = f"from now on the same runs without asking (standing approval {made})"
        elif a.get("stop"):
            then = "the turn's tool use ends; the model answers without tools"
        self._tell(chat, press_id, f"{word} {a['id']} ({shown(a['tool'], one_line=True)}); {then}.")
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
            self.svc.turns.launch(turn_id, (TurnStatus.AWAITING_APPROVAL,))
            await self.refresh_approvals()

    def _press(self, inb: Inbound) -> list[Job]:
        parsed = views.parse_callback(inb.press or "")
        if parsed is None:
            self._tell(inb.chat, inb.press_id, "That button is not one of Palui's.")
            return []
        approval_id, fp, kind = parsed
        return self._checked_answer(inb, approval_id, fp, kind, inb.press_id)

    def _reaction(self, inb: Inbound) -> list[Job]:
        target = self.svc.outbox.sent_message(self.name, inb.chat, inb.target) if inb.target else None
        if target is None or not target["approval_id"] or target["kind"] not in SHOWN:
            return []  # a reaction to anything else means nothing to Palui
        return self._checked_answer(inb, target["approval_id"], target["fingerprint"], inb.reaction or "", None)

    def _checked_answer(self, inb: Inbound, approval_id: str, fp: str | None, kind: str,
                        press_id: str | None) -> list[Job]:
        """A press or reaction ``kind`` (``approve``, ``deny``, ``always``: every argument pinned, ``denystop``) on
        the approval's message, checked against the fingerprint of what it showed."""
        a = self.svc.approvals.find(approval_id)
        if a is None:
            self._tell(inb.chat, press_id, f"Refused: there is no approval {shown(approval_id, one_line=True)}.")
            return []
        if views.fingerprint(a) != fp:
            self._tell(inb.chat, press_id, f"Refused: that button does not match approval {a['id']} as it is now; "
                       "nothing was answered.")
            return []
        return self._answer(inb.chat, approval_id, kind in ("approve", "always"), None, press_id,
                            always={} if kind == "always" else None, stop=kind == "denystop")


def status_text(s: Mapping[str, Any], zone: tzinfo | None = None) -> str:
    """``/status`` as a chat channel answers it (the same facts as the terminal's; times in ``zone``)."""
    return "\n".join(status_lines(s, questions="/answer ID field=value …",
                                   approvals="/approvals sends them again with their buttons", zone=zone,
                                   now=time.time()))
