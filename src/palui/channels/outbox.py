"""Sending for a chat channel (spec §8.3): the worker of the channel's durable outbox.

Everything a channel sends — answers, approval messages and their argument messages, notices, replies to
the person's commands, the edits of approval messages answered elsewhere — is an item of its outbox in
SQLite, written by the service in the transaction of the event that makes it (:mod:`palui.store.outbox`).
:meth:`Outbox.deliver_loop` works through the items in order:

- **Rendered when sent.** An item becomes parts here (:meth:`Outbox.render`: split at the platform's
  limit; an approval as its argument messages and the one with the buttons, or as its outcome once it is
  no longer pending — never a fresh ask), stored before the first send, so that what was sent is known.
- **Each part once.** A part is marked on its way, then sent with its stable key, then marked sent with
  the platform's ref. After a crash the unsent parts go out in order: the one that was on its way goes
  again as it was — with the same key, so on Matrix (a transaction id) it is the same event, exactly once;
  the Bot API has no such key, so on Telegram that one part may show twice.
- **Retried.** A delivery the platform cannot take now (unreachable, ``429 retry_after``, a rejected
  token) is retried with backoff, sooner once the channel's receive loop reaches the platform again;
  one it refuses (a bad request, the bot blocked), or that still fails a day after it was written, is
  given up and shows as the last delivery failure. The first success clears it. A turn never waits.
- **An approval is never lost to a refusal.** When the platform refuses an approval's message with buttons
  for good (a Bot API 400), it is sent again as plain text, without markup or buttons, naming the approval's
  id and the commands that answer it (:meth:`Outbox._plain_approval`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from palui.channels import views
from palui.channels.platform import Backoff, ChannelPlatform
from palui.channels.text import split_message
from palui.text.display import shown

if TYPE_CHECKING:
    from palui.results import OutboxItem, OutboxPart, RenderedPart

log = logging.getLogger("palui.channels")

#: Kinds of parts that show an approval the person can still answer (edited to its outcome once it is not).
SHOWN = ("approval", "approval-plain")
#: The last line of an approval sent as plain text after its message with buttons was refused.
PLAIN_ANSWER = ("Answer with /approve {id} or /deny {id} REASON ({title} refused the message with buttons: {why}; "
                "/approvals sends it again).")
GIVE_UP_SECONDS = 86400.0  # an item still failing a day after it was written is given up (the inbox has it)
IDLE_SECONDS = 1.0  # how often an idle worker looks for items another process wrote
TITLES = {"telegram": "Telegram", "matrix": "Matrix", "slack": "Slack", "discord": "Discord", "email": "email"}


class Outbox(ChannelPlatform):
    """The sending half every channel shares: replies, and the worker of the durable outbox."""

    def reply(self, chat: str, text: str) -> None:
        """Reply to the person in ``chat``: written now (with the update that asked for it, when one is being
        recorded), sent by the worker."""
        self.svc.outbox.add(self.name, chat, "reply", text=text)
        self.wake()

    def resend_approvals(self, chat: str) -> int:
        """``/approvals``: every pending approval's message again, with its buttons. Returns how many."""
        pending = self.svc.approvals.list()
        for a in pending:
            self.svc.outbox.add(self.name, chat, "approval", subject=a["id"])
        self.wake()
        return len(pending)

    async def deliver_loop(self) -> None:
        """Send the outbox in order until cancelled (see the module docstring)."""
        failing = bool(self.svc.channels.get(self.name)["last_failure"])
        backoff = Backoff(base=0.5, cap=60.0)
        while True:
            item = self.svc.outbox.next(self.name)
            if item is None:
                await self._nap(self.woken, IDLE_SECONDS)
                continue
            try:
                await self._deliver(item)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                text = self.redact(f"{_what(item)}: {type(e).__name__}: {e}")
                self.svc.channels.set_failure(self.name, text)
                failing = True
                delay = self.retry_delay(e)
                if delay is None or time.time() - item["created_at"] > GIVE_UP_SECONDS:
                    log.error("%s: delivery given up: %s", self.name, text)
                    self.svc.outbox.close(item["id"], "failed", text)
                    continue
                delay = delay if delay > 0 else backoff.next_delay()
                log.warning("%s: delivery failed, retrying in %.1f s: %s", self.name, delay, text)
                await self._nap(self.reachable, delay)
                continue
            backoff.reset()
            if failing:
                self.svc.channels.set_failure(self.name, None)
                failing = False

    @staticmethod
    async def _nap(event: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), seconds)
        event.clear()

    async def _deliver(self, item: OutboxItem) -> None:
        kept = [p for p in item["parts"] if p["ref"] is not None or p["tried"]]
        whole = self.render(item)
        if whole is None:
            self.svc.outbox.close(item["id"], "dropped", "its subject is gone")
            return
        fresh = whole[len(kept):] if not _outcome(whole) else [] if any(p["kind"] in SHOWN for p in kept) \
            else whole
        rendered = self.svc.outbox.render(item["id"], fresh)
        if rendered is None:
            return
        parts = [p for p in rendered["parts"] if p["ref"] is None]
        if not parts:
            self.svc.outbox.close(item["id"], "dropped" if not rendered["parts"] else "sent")
            return
        for part in parts:
            self.svc.outbox.trying(part["id"])
            try:
                ref = await (self.edit(item["chat_id"], item["target_ref"] or "", part)
                             if item["kind"] == "edit" else self.send_message(item["chat_id"], part))
            except Exception as e:
                maybe = self.maybe_delivered(e)
                self.svc.outbox.part_failed(part["id"], maybe)
                if part["kind"] == "approval" and not maybe and self.retry_delay(e) is None:
                    await self._plain_approval(item, part, e)
                    continue
                raise
            self.svc.outbox.part_sent(part["id"], ref, shown=part["kind"] in SHOWN)

    async def _plain_approval(self, item: OutboxItem, refused: OutboxPart, error: BaseException) -> None:
        """The approval message ``refused`` was refused for good: send it again as plain text (no markup, no
        buttons) with the approval's id and the commands that answer it, in its place (the part refused was
        never shown, so it is rendered anew). Raises when that is refused too (then the item is given up)."""
        a = self.svc.approvals.find(refused["approval_id"] or "")
        if a is None or a["status"] != "pending":
            raise error  # gone or answered meanwhile: the next attempt renders its outcome
        why = shown(self.redact(f"{type(error).__name__}: {error}"), one_line=True)
        commands = PLAIN_ANSWER.format(id=a["id"], title=self.title or self.name, why=why)
        view = views.approval_view(a, now=datetime.now(UTC), zone=self.svc.status.timezone(), limit=self.text_limit,
                                   measure=self.measure, how_to_answer=commands)
        rendered = self.svc.outbox.render(item["id"], [{"kind": "approval-plain", "text": view.text,
                                                        "approval_id": a["id"], "fingerprint": view.fingerprint}])
        plain = next(p for p in (rendered or {"parts": []})["parts"] if p["ref"] is None
                     and p["kind"] == "approval-plain")
        log.warning("%s: the message of approval %s was refused (%s): sent again as plain text", self.name,
                    a["id"], why)
        self.svc.outbox.trying(plain["id"])
        try:
            ref = await self.send_message(item["chat_id"], plain)
        except Exception as e:
            self.svc.outbox.part_failed(plain["id"], self.maybe_delivered(e))
            raise
        self.svc.outbox.part_sent(plain["id"], ref, shown=True)

    def render(self, item: OutboxItem) -> list[RenderedPart] | None:
        """The item as the messages it is shown as (whole, from its first part), None when its subject is
        gone: a turn's answer with its tool lines; an approval as its argument messages and the message
        with the buttons while it is pending, else as its outcome (kind ``approval-outcome``); the edit of
        an approval message to its outcome; a notice or a reply as its text. Split at the platform's limit."""
        kind, subject = item["kind"], item["subject"] or ""
        if kind in ("approval", "edit"):
            a = self.svc.approvals.find(subject)
            if a is None:
                return None
            outcome = views.outcome_text(a, self.name, TITLES)
            if kind == "edit":
                return [{"kind": "edit", "text": outcome}]
            if a["status"] != "pending":
                return [{"kind": "approval-outcome", "text": outcome}]
            view = views.approval_view(a, now=datetime.now(UTC), zone=self.svc.status.timezone(), limit=self.text_limit,
                                       measure=self.measure, how_to_answer=self.how_to_answer.format(id=a["id"]))
            args: list[RenderedPart] = [{"kind": "approval-args", "text": t} for t in view.before]
            return [*args, {"kind": "approval", "text": view.text, "approval_id": a["id"],
                            "fingerprint": view.fingerprint}]
        if kind == "answer":
            try:
                text = views.answer_text(self.svc.turns.result(subject))
            except Exception:  # noqa: BLE001 - a turn removed since: nothing to send
                return None
        elif kind == "reply":
            text = item["text"] or ""
        else:
            text = views.notice_text(kind, item["text"] or "")
        return [{"kind": kind, "text": t} for t in split_message(text, self.text_limit, self.measure)]

    async def refresh_approvals(self) -> None:
        """Edit approval messages whose approval was answered elsewhere, expired or was cancelled (the edit is
        an outbox item, written as the message is closed)."""
        for m in self.svc.outbox.shown_approvals(self.name):
            a = self.svc.approvals.find(m["approval_id"])
            if a is not None and a["status"] == "pending":
                continue
            if self.svc.outbox.close_sent(m["id"]):
                self.wake()


def _outcome(parts: list[RenderedPart]) -> bool:
    return len(parts) == 1 and parts[0]["kind"] == "approval-outcome"


def _what(item: OutboxItem) -> str:
    """How a delivery is named in a failure: ``approval a-… to 111``, ``answer of t-…``, ``job notice``."""
    if item["kind"] in ("approval", "edit"):
        return f"{'edit of ' if item['kind'] == 'edit' else ''}approval {item['subject']}"
    if item["kind"] == "answer":
        return f"answer of {item['subject']}"
    return f"{item['kind']} notice" if item["kind"] != "reply" else "reply"
