"""The person's channel (SPEC §1): the inbox first, then apprise targets, then subscribed chat channels.

One :class:`Notifier` per service. Everything that tells the person something (answers,
approval requests, job results, webhook summaries, pause notices, "changed — review" flags,
``messages__send_message``) goes through it. The inbox row is written first, in its own
transaction, so nothing is lost when a delivery fails; apprise deliveries run in a background
thread; subscribers (the chat channels ``palui serve`` starts) are called with the
:class:`~palui.types.Notice` and must not block (they queue the delivery themselves). A failing
subscriber is logged and never stops the others or the caller. The service never imports a
channel: channels subscribe here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from palui import delivery
from palui.config import Settings
from palui.store.db import Database
from palui.types import Notice

log = logging.getLogger("palui.channel")

Subscriber = Callable[[Notice], None]


class Notifier:
    """Writes the inbox and fans a notice out to apprise targets and subscribers.

    Args:
        db: the database (the inbox table).
        settings: ``notify.apprise`` is read at each notice.
    """

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
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
        now = time.time()
        with self.db.write() as c:
            cur = c.execute("INSERT INTO inbox (time, kind, text, turn_id, conversation_id) VALUES (?,?,?,?,?)",
                            (now, kind, text, turn_id, conversation_id))
            inbox_id = int(cur.lastrowid or 0)
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
        webhook, cap, notice, message. Returns once the inbox row is written; never raises for a delivery."""
        notice = self._write(kind, text, turn_id, conversation_id, approval_id, elicitation_id)
        try:
            delivery.deliver_in_background(self.settings.get("notify.apprise"), text,
                                           title=delivery.title_for(kind))
        except Exception:  # e.g. no thread can be started: the inbox already has the message
            log.exception("could not start channel delivery")
        self._fan_out(notice)

    async def send_now(self, kind: str, text: str, *, turn_id: str | None = None,
                       conversation_id: str | None = None) -> list[str]:
        """Like a notice, but wait for the apprise deliveries: returns one secret-free failure text
        per apprise target that did not accept the text (``messages__send_message`` reports them)."""
        notice = self._write(kind, text, turn_id, conversation_id, None)
        self._fan_out(notice)
        return await delivery.deliver_async(self.settings.get("notify.apprise"), text,
                                            title=delivery.title_for(kind))
