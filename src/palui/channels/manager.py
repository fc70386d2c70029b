"""Running the chat channels inside ``palui serve`` (spec §8.3).

:class:`ChannelManager` is one of the start-up hooks the ``palui serve`` command passes to the
server (:func:`palui.server.main.serve`): on entry it installs log redaction for every channel
secret, subscribes to the person's channel (the service's notices) and starts a supervisor loop;
on exit it stops every channel before the service drains. Every second the loop:

- starts channels added since (``palui channels add`` from another process), stops removed ones,
  and restarts one whose secret was renewed (``channels add`` again: a new token, the pairing kept);
- edits approval messages answered elsewhere or expired (:meth:`Channel.refresh_approvals`) and
  gives each channel its second (:meth:`Channel.tick`: Matrix joins invites that waited for a code);
- restarts a channel whose receive loop crashed, with backoff (a channel that is down never
  blocks a turn: deliveries wait in its durable outbox, and the inbox already has them).

What a notice says is already in the channels' outboxes when the notifier calls (the person's channel
writes the items in the transaction of the event, :mod:`palui.store.outbox`): a notice only wakes each
channel's outbox worker, on the event loop (the notifier may call from any thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from palui.channels.base import Channel
from palui.channels.redaction import Redactor, install_record_redaction, quiet_library_loggers
from palui.types import Notice

if TYPE_CHECKING:
    from palui.service.api import Service

log = logging.getLogger("palui.channels")

#: kind -> (module, class): each channel kind is one module (docs/channels.md).
KINDS: dict[str, tuple[str, str]] = {
    "telegram": ("palui.channels.telegram", "TelegramChannel"),
    "matrix": ("palui.channels.matrix", "MatrixChannel"),
    "slack": ("palui.channels.slack", "SlackChannel"),
    "discord": ("palui.channels.discord", "DiscordChannel"),
    "email": ("palui.channels.mail", "EmailChannel"),
}
LOOP_SECONDS = 1.0
PRUNE_SECONDS = 3600.0


def channel_class(kind: str) -> type[Channel]:
    module, cls = KINDS[kind]
    found: type[Channel] = getattr(importlib.import_module(module), cls)
    return found


def test_function(kind: str) -> Callable[..., Any]:
    """The kind's ``test_channel(channel, secret, redact)`` coroutine function (``palui channels test``)."""
    found: Callable[..., Any] = importlib.import_module(KINDS[kind][0]).test_channel
    return found


class _Running:
    def __init__(self, channel: Channel, config: object) -> None:
        self.channel = channel
        self.config = config  # the stored settings it started with (a renewed secret changes them)
        self.receive: asyncio.Task[None] | None = None
        self.deliver: asyncio.Task[None] | None = None
        self.failures = 0
        self.restart_at = 0.0


class ChannelManager:
    """Starts, supervises and stops the stored channels of one service (see the module docstring)."""

    def __init__(self, svc: Service) -> None:
        self.svc = svc
        self.redact = Redactor()
        self.running: dict[str, _Running] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._pruned = 0.0

    async def __aenter__(self) -> ChannelManager:
        quiet_library_loggers()
        install_record_redaction(self.redact)
        self._loop = asyncio.get_running_loop()
        self._unsubscribe = self.svc.notifier.subscribe(self._notice)
        self._sync()
        self._task = asyncio.create_task(self._supervise())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._unsubscribe:
            self._unsubscribe()
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for name in list(self.running):
            await self._stop(name)

    # -- notices ------------------------------------------------------------------------------------

    def _notice(self, notice: Notice) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._route, notice)

    def _route(self, notice: Notice) -> None:
        for r in self.running.values():
            r.channel.wake()

    # -- supervision ----------------------------------------------------------------------------------

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(LOOP_SECONDS)
            try:
                self._sync()
                for r in list(self.running.values()):
                    await r.channel.refresh_approvals()
                    await r.channel.tick()
                if time.monotonic() - self._pruned > PRUNE_SECONDS:
                    self._pruned = time.monotonic()
                    self.svc.channel_updates.prune()
                    self.svc.outbox.prune()
            except Exception:  # one bad round must not stop the channels
                log.exception("channel supervision failed")

    def _sync(self) -> None:
        stored = {c["name"]: c for c in self.svc.channels.list()}
        for name in [n for n in self.running if n not in stored]:
            asyncio.ensure_future(self._stop(name))
        for name, c in stored.items():
            r = self.running.get(name)
            if r is not None and r.config != c["config"]:  # a renewed secret: start again with it
                asyncio.ensure_future(self._stop(name))
                continue
            if r is None:
                try:
                    channel = channel_class(c["kind"])(self.svc, name, self.redact)
                except Exception as e:  # e.g. a damaged secrets file: shown, retried next round
                    self.svc.channels.set_state(name, self.redact(f"error: cannot start: {e}"))
                    continue
                r = self.running[name] = _Running(channel, c["config"])
                r.deliver = asyncio.create_task(channel.deliver_loop())
            if (r.receive is None or r.receive.done()) and time.monotonic() >= r.restart_at:
                if r.receive is not None and r.receive.done() and not r.receive.cancelled():
                    exc = r.receive.exception() or RuntimeError("the receive loop ended")
                    r.failures += 1
                    r.restart_at = time.monotonic() + min(60.0, 2.0 ** r.failures)
                    state = self.redact(f"error: {type(exc).__name__}: {exc}")
                    self.svc.channels.set_state(name, state)
                    log.error("%s: receive loop failed (restarting): %s", name, state)
                    r.receive = None
                    continue
                r.receive = asyncio.create_task(r.channel.run())

    async def _stop(self, name: str) -> None:
        r = self.running.pop(name, None)
        if r is None:
            return
        for task in (r.receive, r.deliver, *r.channel.tasks):
            if task is not None and not task.done():
                task.cancel()
        for task in (r.receive, r.deliver):
            if task is not None:
                with contextlib.suppress(BaseException):
                    await task
