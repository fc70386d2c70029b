"""The person's channel (spec §1): the inbox first, then apprise targets, then the chat channels.

One :class:`Notifier` per service. Everything that tells the person something (answers,
approval requests, job results, webhook summaries, pause notices, "changed — review" flags,
``messages__send_message``) goes through it. The inbox row and the chat channels' deliveries (the
durable outbox, :mod:`palui.store.outbox`: one item per paired channel, or per chat of the answer's
conversation) are written in one transaction — the caller's, when it holds one, so a turn's ask or
answer and what tells the person about it commit together — also in a process with no service, whose
items go out at the next ``palui serve``. Once it commits, apprise deliveries start in a background
thread and subscribers (the chat channels ``palui serve`` runs) are called with the
:class:`~palui.types.Notice`: they must not block (they wake their outbox worker). A failing
subscriber is logged and never stops the others or the caller. The service never imports a
channel: channels subscribe here.

It also reads what it wrote (:meth:`Notifier.inbox`) and checks its delivery targets in full before
``palui serve`` starts (:meth:`Notifier.check_delivery_targets`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from palui import delivery
from palui.config import Settings
from palui.errors import ConfigError
from palui.service.clock import Clock
from palui.store import outbox
from palui.store.db import Database
from palui.types import Notice

if TYPE_CHECKING:
    from palui.results import InboxItem

log = logging.getLogger("palui.channel")

Subscriber = Callable[[Notice], None]


class Notices(Protocol):
    """The person's channel as a front end sees it (``Service.notifier``): what was told (the inbox), every
    later notice (a chat channel subscribes), and the delivery targets checked before ``palui serve``
    starts. Telling the person is the parts' (they call :class:`Notifier`); a front end does not."""

    def inbox(self, limit: int = 100) -> list[InboxItem]: ...
    def subscribe(self, fn: Subscriber) -> Callable[[], None]: ...
    def check_delivery_targets(self) -> None: ...


class Notifier:
    """Writes the inbox and fans a notice out to apprise targets and subscribers.

    Args:
        db: the database (the inbox table).
        settings: ``notify.apprise`` is read at each notice.
        clock: stamps the inbox rows (a new :class:`~palui.service.clock.Clock` when None).
    """

    def __init__(self, db: Database, settings: Settings, clock: Clock | None = None) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock or Clock(settings)
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Call ``fn(notice)`` for every later notice; returns a function that unsubscribes."""
        with self._lock:
            self._subscribers.append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subscribers:
                    self._subscribers.remove(fn)

        return unsubscribe

    def _write(self, kind: str, text: str, turn_id: str | None, conversation_id: str | None,
               approval_id: str | None, elicitation_id: str | None = None) -> Notice:
        now = self.clock.now()
        with self.db.write() as c:
            cur = c.execute("INSERT INTO inbox (time, kind, text, turn_id, conversation_id) VALUES (?,?,?,?,?)",
                            (now, kind, text, turn_id, conversation_id))
            inbox_id = int(cur.lastrowid or 0)
            outbox.enqueue_notice(c, kind, text, now, turn_id=turn_id, conversation_id=conversation_id,
                                  approval_id=approval_id)
        return Notice(inbox_id=inbox_id, kind=kind, text=text, time=now, turn_id=turn_id,
                      conversation_id=conversation_id, approval_id=approval_id, elicitation_id=elicitation_id)

    def _fan_out(self, notice: Notice) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for fn in subscribers:
            try:
                fn(notice)
            except Exception:  # one broken channel must not stop the others, nor the turn
                log.exception("a channel subscriber failed")

    def __call__(self, kind: str, text: str, *, turn_id: str | None = None, conversation_id: str | None = None,
                 approval_id: str | None = None, elicitation_id: str | None = None) -> None:
        """Put a message on the person's channel. ``kind`` is one of answer, approval, elicitation, job,
        webhook, cap, notice, message. Returns once the inbox row and the chat channels' deliveries are
        written (inside the caller's transaction when one is open: they commit with it); apprise and the
        subscribers hear of it after the commit. Never raises for a delivery."""
        notice = self._write(kind, text, turn_id, conversation_id, approval_id, elicitation_id)
        self.db.after_commit(lambda: self._deliver(notice))

    def _deliver(self, notice: Notice) -> None:
        try:
            delivery.deliver_in_background(self.settings.notify.apprise, notice.text,
                                           title=delivery.title_for(notice.kind))
        except Exception:  # e.g. no thread can be started: the inbox already has the message
            log.exception("could not start channel delivery")
        self._fan_out(notice)

    async def send_now(self, kind: str, text: str, *, turn_id: str | None = None,
                       conversation_id: str | None = None) -> list[str]:
        """Like a notice, but wait for the apprise deliveries: returns one secret-free failure text
        per apprise target that did not accept the text (``messages__send_message`` reports them)."""
        notice = self._write(kind, text, turn_id, conversation_id, None)
        self.db.after_commit(lambda: self._fan_out(notice))
        return await delivery.deliver_async(self.settings.notify.apprise, text,
                                            title=delivery.title_for(kind))

    def inbox(self, limit: int = 100) -> list[InboxItem]:
        """The newest ``limit`` messages, oldest first: ``[{"time","kind","text","turn"}]`` (ISO 8601 UTC)."""
        rows = self.db.all("SELECT * FROM (SELECT * FROM inbox ORDER BY id DESC LIMIT ?) ORDER BY id", (limit,))
        return [{"time": datetime.fromtimestamp(r["time"], UTC).isoformat(), "kind": r["kind"],
                 "text": r["text"], "turn": r["turn_id"]} for r in rows]

    def check_delivery_targets(self) -> None:
        """The full check of ``notify.apprise`` and ``messages.contacts`` that ``palui serve`` makes before
        it starts (every other start checks their syntax only: importing apprise is slow). Raises
        ConfigError naming the key and the item, never the URL (apprise URLs hold tokens)."""
        fix = "is not a URL apprise can use: check the service name and the URL's parts in apprise's list of services"
        where = self.settings.config_file
        urls = list(self.settings.notify.apprise)
        for position in delivery.unknown_targets(urls):
            scheme = urls[position - 1].split("://", 1)[0][:20]
            raise ConfigError(f"{where}: key 'notify.apprise': item {position} (a {scheme}:// URL) {fix}")
        contacts = dict(self.settings.messages.contacts)
        names = list(contacts)
        for position in delivery.unknown_targets([contacts[n] for n in names]):
            raise ConfigError(f"{where}: key 'messages.contacts': contact {names[position - 1]!r} {fix}")
