"""Service part: the chat channels' durable outbox, as the channels work through it (spec §8.3).

The person's channel (:class:`~palui.service.notifier.Notifier`) writes an item per delivery in the
transaction of the event that makes it; a channel writes its own (replies to the person's commands, the
approvals ``/approvals`` sends again, the edit of an approval message answered elsewhere) the same way.
``palui serve`` runs one worker per channel (:mod:`palui.channels.outbox`) that takes the oldest pending
item (:meth:`ChannelOutboxPart.outbox_next`), renders it into parts (:meth:`~ChannelOutboxPart.outbox_render`:
kept across a crash), and sends the parts in order, each marked on its way and then sent; the rows and
their rules are :mod:`palui.store.outbox`'s. Items older than ``retention.days`` are pruned like the inbox
(spec §10.2).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.config import Settings
from palui.errors import UsageError
from palui.service.clock import Clock
from palui.store import outbox
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import OutboxItem, RenderedPart

DAY = 86400.0
#: What a channel may write itself: replies, approvals sent again (``/approvals``), edits of approval messages.
OWN_KINDS = (outbox.REPLY, outbox.APPROVAL, outbox.EDIT)
ENDINGS = (outbox.SENT, outbox.FAILED, outbox.DROPPED)


class ChannelOutboxPart:
    """The outbox's items and parts as a channel's worker takes, renders, sends and closes them.

    Args:
        db, settings, clock: the service's shared collaborators (``retention.days`` prunes the outbox).
    """

    def __init__(self, db: Database, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    def outbox_add(self, name: str, chat: str, kind: str, *, subject: str | None = None, text: str | None = None,
                   target_ref: str | None = None) -> int:
        """A delivery the channel ``name`` makes itself (``kind`` reply with ``text``; approval with the
        approval's id as ``subject``; edit of the message ``target_ref`` to the outcome of the approval
        ``subject``), written in the caller's transaction when one is open (a command's reply commits with
        the update that asked for it). Returns the item's id. Raises UsageError for another kind."""
        if kind not in OWN_KINDS:
            raise UsageError(f"a channel writes only {', '.join(OWN_KINDS)} items, not {kind!r}")
        with self.db.write() as c:
            item_id = outbox.enqueue(c, name, chat, kind, self.clock.now(), subject=subject, text=text,
                                     target_ref=target_ref)
        return item_id

    def outbox_next(self, name: str) -> OutboxItem | None:
        """The channel's oldest pending item with its parts (``{"id","channel","chat_id","kind","subject",
        "text","target_ref","turn_id","conversation_id","state","error","created_at","parts"}``), or None."""
        return outbox.next_item(self.db, name)

    def outbox_render(self, item_id: int, parts: list[RenderedPart]) -> OutboxItem | None:
        """Store what the channel rendered a pending item into (``[{"kind","text","approval_id"?,
        "fingerprint"?}]``), replacing the parts never tried; parts sent or perhaps delivered are kept.
        Returns the item with its parts, None when it is gone."""
        return outbox.render(self.db, item_id, parts)

    def outbox_trying(self, part_id: int) -> None:
        """A part's send starts (marked first, so a crash while it is on its way sends it again as it was)."""
        outbox.trying(self.db, part_id)

    def outbox_part_failed(self, part_id: int, maybe_delivered: bool = False) -> None:
        """A part's send failed; ``maybe_delivered`` when the platform may have it anyway (a timeout)."""
        outbox.part_failed(self.db, part_id, maybe_delivered)

    def outbox_part_sent(self, part_id: int, ref: str, shown: bool = False) -> bool:
        """A part was sent as the platform's message ``ref`` (``shown``: it carries an approval's live
        buttons). Returns whether that completed its item."""
        return outbox.part_sent(self.db, part_id, ref, self.clock.now(), state="shown" if shown else "sent")

    def outbox_close(self, item_id: int, state: str, error: str | None = None) -> None:
        """End a pending item: ``sent`` (an edit made), ``failed`` (refused, or failing too long; ``error``
        says why, redacted) or ``dropped`` (nothing left to send). Raises UsageError for another state."""
        if state not in ENDINGS:
            raise UsageError(f"an outbox item ends {', '.join(ENDINGS)}, not {state!r}")
        outbox.close(self.db, item_id, state, self.clock.now(), error)

    def prune_outbox(self, now: float | None = None) -> int:
        """Delete a batch of items older than ``retention.days`` (spec §10.2), sent or not. Returns how many."""
        now = self.clock.now() if now is None else now
        return outbox.prune(self.db, now - self.settings.retention.days * DAY)
