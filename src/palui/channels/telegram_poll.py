"""Receiving Telegram updates exactly once with python-telegram-bot's low-level ``telegram.Bot``.

Why not ``telegram.ext.Application``/``Updater`` (measured, docs/channels.md):

- the Updater confirms an update as soon as it has *fetched* it (its next ``getUpdates`` runs at
  once with ``offset = last + 1`` while the handler may still run) and keeps the offset only in
  memory: a kill while a handler runs loses that update;
- the Application runs updates one at a time unless told otherwise: a ``/stop`` would wait behind
  a running turn;
- one malformed update makes ``Bot.get_updates`` raise for the whole batch, every time.

So :class:`TelegramPoller` polls itself: raw ``getUpdates`` through ``Bot.do_api_request`` (each
update parsed on its own; a malformed one is recorded and skipped), and each update is handed to
``on_update``, which records its id in the same transaction as its work
(:meth:`palui.channels.base.Channel.receive`) before the next poll confirms it to Telegram. A
restart resumes from one past the highest recorded id; an update seen before is dropped.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import logging
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from telegram import Bot, Update
from telegram.error import Conflict, EndPointNotFound, InvalidToken, NetworkError, RetryAfter, TimedOut

from palui.channels.platform import Backoff
from palui.channels.redaction import Redactor

log = logging.getLogger("palui.channels.telegram")

ALLOWED_UPDATES = ("message", "edited_message", "callback_query")
#: The state while Telegram answers 401/404 to the bot's token (the channel adds what to do): retried with
#: backoff, since Telegram has been seen to reject a good token for a while.
TOKEN_REJECTED = "error: the bot token was rejected by Telegram"
TOKEN_BACKOFF_CAP = 60.0  # seconds between two tries of a rejected token, at most


def retry_after_seconds(exc: RetryAfter) -> float:
    """``RetryAfter.retry_after`` in seconds, an int or (``PTB_TIMEDELTA=1``) a timedelta."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        value: int | float | dtm.timedelta = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


class TelegramPoller:
    """Long-polls ``getUpdates`` and hands each update once to ``on_update(update)``; a malformed
    one goes to ``on_malformed(update_id, reason)``. ``on_state`` hears ``connected`` / ``error: …``
    (redacted). ``next_offset`` is read once at the start (one past the highest recorded id)."""

    def __init__(self, bot: Bot, *, on_update: Callable[[Update], None],
                 on_malformed: Callable[[int, str], None], on_state: Callable[[str], None],
                 next_offset: int | None, redact: Redactor, poll_timeout: int = 30,
                 allowed_updates: Sequence[str] = ALLOWED_UPDATES) -> None:
        self.bot = bot
        self.on_update = on_update
        self.on_malformed = on_malformed
        self.on_state = on_state
        self.offset = next_offset
        self.redact = redact
        self.poll_timeout = poll_timeout
        self.allowed_updates = list(allowed_updates)
        self.backoff = Backoff()
        self.token_backoff = Backoff(cap=TOKEN_BACKOFF_CAP)

    async def run(self) -> None:
        """Poll until cancelled; a rejected token (401/404) is tried again with backoff, its state said."""
        await self._initialize()
        while True:
            try:
                raw = await self._poll()
            except RetryAfter as exc:
                wait = retry_after_seconds(exc)
                self.on_state(f"error: rate limited by Telegram, retrying in {wait:.0f} s")
                await asyncio.sleep(wait)
                continue
            except (InvalidToken, EndPointNotFound):
                # 401/404 on our own token (once initialised, PTB reports them as EndPointNotFound)
                self.on_state(TOKEN_REJECTED)
                await asyncio.sleep(self.token_backoff.next_delay())
                continue
            except Conflict:
                self.on_state("error: another process is polling this bot")
                await asyncio.sleep(self.backoff.next_delay())
                continue
            except (TimedOut, NetworkError) as exc:
                self.on_state(f"error: Telegram is unreachable: {self.redact(str(exc))}")
                await asyncio.sleep(self.backoff.next_delay())
                continue
            self.backoff.reset()
            self.token_backoff.reset()
            self.on_state("connected")
            for item in raw:
                self._dispatch(item)

    async def _initialize(self) -> None:
        """``Bot.initialize()`` (getMe once), retried on network errors."""
        while True:
            try:
                await self.bot.initialize()
                return
            except InvalidToken:
                self.on_state(TOKEN_REJECTED)
                await asyncio.sleep(self.token_backoff.next_delay())
            except RetryAfter as exc:
                await asyncio.sleep(retry_after_seconds(exc))
            except (TimedOut, NetworkError) as exc:
                self.on_state(f"error: Telegram is unreachable: {self.redact(str(exc))}")
                await asyncio.sleep(self.backoff.next_delay())

    async def _poll(self) -> list[object]:
        kwargs: dict[str, Any] = {"timeout": self.poll_timeout, "allowed_updates": self.allowed_updates}
        if self.offset is not None:
            kwargs["offset"] = self.offset
        # "getupdates": method names are case-insensitive, and do_api_request warns (PTBUserWarning)
        # for names the Bot has as methods. The poll then uses the Bot's general request pool.
        result = await self.bot.do_api_request("getupdates", api_kwargs=kwargs, read_timeout=self.poll_timeout + 10)
        return result if isinstance(result, list) else []

    def _dispatch(self, item: object) -> None:
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(update_id, int) or isinstance(update_id, bool):
            log.warning("dropped an update without an update_id")
            return
        self.offset = max(self.offset or 0, update_id + 1)
        try:
            update = Update.de_json(item, self.bot)
        except Exception as exc:  # a malformed update must not wedge the loop (it would every poll)
            self.on_malformed(update_id, self.redact(f"{type(exc).__name__}: {exc}"))
            return
        try:
            self.on_update(update)
        except Exception as exc:  # recorded as failed by the channel; never stops the poll
            log.error("update %s failed: %s", update_id, self.redact(f"{type(exc).__name__}: {exc}"))


__all__ = ["ALLOWED_UPDATES", "TOKEN_REJECTED", "TelegramPoller", "retry_after_seconds"]
