"""Service part: the chat channels' durable outbox, as the channels work through it, and what they sent (spec §8.3).

The person's channel (:class:`~palui.service.notifier.Notifier`) writes an item per delivery in the
transaction of the event that makes it; a channel writes its own (replies to the person's commands, the
approvals ``/approvals`` sends again, the edit of an approval message answered elsewhere) the same way.
``palui serve`` runs one worker per channel (:mod:`palui.channels.outbox`) that takes the oldest pending
item (:meth:`OutboxPart.next`), renders it into parts (:meth:`~OutboxPart.render`:
kept across a crash), and sends the parts in order, each marked on its way and then sent; the rows and
their rules are :mod:`palui.store.outbox`'s. Items older than ``retention.days`` are pruned like the inbox
(spec §10.2).

Message refs Palui sent are stored with what they were (an answer, an approval with live buttons and the
fingerprint shown, a notice), so a reaction, a press or a reply can be traced back
(:meth:`OutboxPart.sent_message`), and an approval answered elsewhere can be edited
(:meth:`OutboxPart.close_sent` puts the edit in the outbox).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.config import Settings
from palui.errors import UsageError
from palui.service.clock import Clock
from palui.store import outbox
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import OutboxItem, RenderedPart, SentMessage, ShownApproval

DAY = 86400.0
#: What a channel may write itself: replies, approvals sent again (``/approvals``), edits of approval messages.
OWN_KINDS = (outbox.REPLY, outbox.APPROVAL, outbox.EDIT)
ENDINGS = (outbox.SENT, outbox.FAILED, outbox.DROPPED)


class OutboxPart:
    """The outbox's items and parts as a channel's worker takes, renders, sends and closes them; the messages
    a channel sent.

    Args:
        db, settings, clock: the service's shared collaborators (``retention.days`` prunes the outbox).
    """

    def __init__(self, db: Database, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    def add(self, name: str, chat: str, kind: str, *, subject: str | None = None, text: str | None = None,
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

    def next(self, name: str) -> OutboxItem | None:
        """The channel's oldest pending item with its parts (``{"id","channel","chat_id","kind","subject",
        "text","target_ref","turn_id","conversation_id","state","error","created_at","parts"}``), or None."""
        return outbox.next_item(self.db, name)

    def render(self, item_id: int, parts: list[RenderedPart]) -> OutboxItem | None:
        """Store what the channel rendered a pending item into (``[{"kind","text","approval_id"?,
        "fingerprint"?}]``), replacing the parts never tried; parts sent or perhaps delivered are kept.
        Returns the item with its parts, None when it is gone."""
        return outbox.render(self.db, item_id, parts)

    def trying(self, part_id: int) -> None:
        """A part's send starts (marked first, so a crash while it is on its way sends it again as it was)."""
        outbox.trying(self.db, part_id)

    def part_failed(self, part_id: int, maybe_delivered: bool = False) -> None:
        """A part's send failed; ``maybe_delivered`` when the platform may have it anyway (a timeout)."""
        outbox.part_failed(self.db, part_id, maybe_delivered)

    def part_sent(self, part_id: int, ref: str, shown: bool = False) -> bool:
        """A part was sent as the platform's message ``ref`` (``shown``: it carries an approval's live
        buttons). Returns whether that completed its item."""
        return outbox.part_sent(self.db, part_id, ref, self.clock.now(), state="shown" if shown else "sent")

    def close(self, item_id: int, state: str, error: str | None = None) -> None:
        """End a pending item: ``sent`` (an edit made), ``failed`` (refused, or failing too long; ``error``
        says why, redacted) or ``dropped`` (nothing left to send). Raises UsageError for another state."""
        if state not in ENDINGS:
            raise UsageError(f"an outbox item ends {', '.join(ENDINGS)}, not {state!r}")
        outbox.close(self.db, item_id, state, self.clock.now(), error)

    def prune(self, now: float | None = None) -> int:
        """Delete a batch of items older than ``retention.days`` (spec §10.2), sent or not. Returns how many."""
        now = self.clock.now() if now is None else now
        return outbox.prune(self.db, now - self.settings.retention.days * DAY)

    # -- what a channel sent ----------------------------------------------------------------------------

    def sent_message(self, name: str, chat: str, ref: str) -> SentMessage | None:
        """``{"id","kind","turn_id","conversation_id","approval_id","fingerprint","state"}`` of a message this
        channel sent in ``chat``, or None (not Palui's)."""
        r = self.db.one("SELECT * FROM channel_messages WHERE channel = ? AND chat_id = ? AND ref = ?"
                        " ORDER BY id DESC LIMIT 1", (name, chat, ref))
        if r is None:
            return None
        return {"id": r["id"], "channel": r["channel"], "chat_id": r["chat_id"], "ref": r["ref"], "kind": r["kind"],
                "turn_id": r["turn_id"], "conversation_id": r["conversation_id"], "approval_id": r["approval_id"],
                "fingerprint": r["fingerprint"], "state": r["state"], "created_at": r["created_at"]}

    def shown_approvals(self, name: str) -> list[ShownApproval]:
        """Approval messages of this channel whose buttons are still live: ``[{"id","chat_id","ref",
        "approval_id","fingerprint"}]`` (to edit when the approval is answered elsewhere or expires)."""
        return [{"id": r["id"], "chat_id": r["chat_id"], "ref": r["ref"], "approval_id": r["approval_id"],
                 "fingerprint": r["fingerprint"]}
                for r in self.db.all("SELECT id, chat_id, ref, approval_id, fingerprint FROM channel_messages"
                                     " WHERE channel = ? AND state = 'shown'", (name,))]

    def close_sent(self, message_id: int) -> bool:
        """Mark an approval message closed and, in the same transaction, put the edit to its outcome in the
        channel's outbox (spec §8.3). False when it already was closed."""
        with self.db.write() as c:
            m = c.execute("SELECT channel, chat_id, ref, approval_id FROM channel_messages WHERE id = ? AND"
                          " state = 'shown'", (message_id,)).fetchone()
            if m is None:
                return False
            c.execute("UPDATE channel_messages SET state = 'closed' WHERE id = ?", (message_id,))
            outbox.enqueue(c, m["channel"], m["chat_id"], outbox.EDIT, self.clock.now(), subject=m["approval_id"],
                           target_ref=m["ref"])
        return True
