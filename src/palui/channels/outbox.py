"""Sending for a chat channel (spec §8.3): one ordered outbox, notices, answers, approvals and their edits.

Every message a channel sends goes through :meth:`Outbox.enqueue`: a worker sends them in order,
retries a failing delivery with backoff (``429 retry_after`` honoured through
:meth:`ChannelPlatform.retry_delay`) for up to 15 minutes, records the last failure for
``/status`` and never blocks a turn (the inbox already holds every notice).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from datetime import UTC, datetime

from palui.channels import views
from palui.channels.platform import ChannelPlatform, Job
from palui.types import Notice

log = logging.getLogger("palui.channels")

DELIVERY_GIVE_UP_SECONDS = 900.0  # a delivery failing this long is dropped (the inbox has it)
TITLES = {"telegram": "Telegram", "matrix": "Matrix"}


class Outbox(ChannelPlatform):
    """The sending half every channel shares."""

    def reply(self, chat: str, text: str, kind: str = "reply") -> None:
        async def go() -> None:
            refs = await self.send(chat, text)
            self.svc.record_sent(self.name, chat, refs, kind)
        self.enqueue(f"{kind} to {chat}", go)

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

    def deliver_notice(self, notice: Notice) -> None:
        """A message on the person's channel for this channel's person."""
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
