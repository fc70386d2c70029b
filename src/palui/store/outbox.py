"""The chat channels' durable outbox (spec §8.3): what Palui sends to a channel, as rows in SQLite.

- **An item** (``channel_outbox``) is one delivery to one chat, channel-neutral: its ``kind`` (``answer``,
  ``approval``, ``edit``, ``reply``, or a notice's kind: ``job``, ``webhook``, ``notice``…), its subject
  (the turn of an answer, the approval of an ask or of an edit) and, for notices and replies, the text.
  It is written in the transaction of the event that makes it (:func:`enqueue_notice` is called by the
  person's channel inside that transaction, also in a ``palui run`` with no service) and rendered by the
  channel when it is sent, so the service never imports a channel.
- **Its parts** (``channel_outbox_parts``) are the messages the channel rendered it into (a long answer
  split at the platform's limit, an approval's argument messages and the one with the buttons). Each part
  has a random ``key`` (Matrix's transaction id: a part sent again after a crash is the same event), is
  marked ``tried`` before its send starts and ``sent`` with the platform's ref once it is answered, in the
  transaction that records the sent message (``channel_messages``). Parts never tried are rendered again
  at the next attempt (an approval answered meanwhile becomes its outcome); a part ``tried`` and not sent
  was in flight at a crash (or its send timed out): it goes again as it was.

An item is ``pending`` until every part is sent (``sent``), the platform refused it (``failed``) or there
was nothing left to send (``dropped``). Items are taken per channel in ``id`` order. Every write goes
through :meth:`~palui.store.db.Database.write`.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import OutboxItem, OutboxPart, RenderedPart

PENDING, SENT, FAILED, DROPPED = "pending", "sent", "failed", "dropped"
#: Kinds whose item is rendered from its subject, not from a stored text.
ANSWER, APPROVAL, EDIT, REPLY = "answer", "approval", "edit", "reply"


def enqueue(c: sqlite3.Connection, channel: str, chat: str, kind: str, now: float, *, subject: str | None = None,
            text: str | None = None, target_ref: str | None = None, turn_id: str | None = None,
            conversation_id: str | None = None) -> int:
    """Write one item inside the caller's transaction ``c``. Returns its id."""
    cur = c.execute("INSERT INTO channel_outbox (channel, chat_id, kind, subject, text, target_ref, turn_id,"
                    " conversation_id, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                    (channel, chat, kind, subject, text, target_ref, turn_id, conversation_id, now))
    return int(cur.lastrowid or 0)


def enqueue_notice(c: sqlite3.Connection, kind: str, text: str, now: float, *, turn_id: str | None,
                   conversation_id: str | None, approval_id: str | None) -> int:
    """The items of one message on the person's channel, inside the caller's transaction: a turn's answer
    to each chat whose current conversation it is; everything else to the person's chat of every paired
    channel (a channel added but never paired gets nothing, whichever process writes). An approval
    request is rendered from its approval when sent (with its buttons, or as its outcome once answered).
    Returns the number of items written."""
    if kind == ANSWER:
        targets = c.execute("SELECT channel, chat_id FROM channel_chats WHERE conversation_id = ?",
                            (conversation_id,)).fetchall() if conversation_id else []
    else:
        targets = c.execute("SELECT name, person_chat FROM channels WHERE person_chat IS NOT NULL").fetchall()
    for channel, chat in targets:
        if kind == ANSWER:
            enqueue(c, channel, chat, ANSWER, now, subject=turn_id, turn_id=turn_id, conversation_id=conversation_id)
        elif kind == APPROVAL and approval_id:
            enqueue(c, channel, chat, APPROVAL, now, subject=approval_id, turn_id=turn_id,
                    conversation_id=conversation_id)
        else:
            enqueue(c, channel, chat, kind, now, text=text, turn_id=turn_id, conversation_id=conversation_id)
    return len(targets)


def _part(r: sqlite3.Row) -> OutboxPart:
    return {"id": r["id"], "n": r["n"], "kind": r["kind"], "text": r["text"], "key": r["key"],
            "approval_id": r["approval_id"], "fingerprint": r["fingerprint"], "tried": bool(r["tried"]),
            "ref": r["ref"]}


def item(db: Database, item_id: int) -> OutboxItem | None:
    """One item with its parts in order, or None."""
    with db.read() as c:
        r = c.execute("SELECT * FROM channel_outbox WHERE id = ?", (item_id,)).fetchone()
        if r is None:
            return None
        parts = c.execute("SELECT * FROM channel_outbox_parts WHERE item_id = ? ORDER BY n, id", (item_id,)).fetchall()
    return {"id": r["id"], "channel": r["channel"], "chat_id": r["chat_id"], "kind": r["kind"],
            "subject": r["subject"], "text": r["text"], "target_ref": r["target_ref"], "turn_id": r["turn_id"],
            "conversation_id": r["conversation_id"], "state": r["state"], "error": r["error"],
            "created_at": r["created_at"], "parts": [_part(p) for p in parts]}


def next_item(db: Database, channel: str) -> OutboxItem | None:
    """The channel's oldest pending item (the outbox is ordered), or None."""
    r = db.one("SELECT id FROM channel_outbox WHERE channel = ? AND state = 'pending' ORDER BY id LIMIT 1",
               (channel,))
    return None if r is None else item(db, int(r[0]))


def pending_count(db: Database, channel: str) -> int:
    """How many items of the channel wait to be sent."""
    return int(db.row("SELECT COUNT(*) FROM channel_outbox WHERE channel = ? AND state = 'pending'", (channel,))[0])


def render(db: Database, item_id: int, parts: list[RenderedPart]) -> OutboxItem | None:
    """Replace the parts of a pending item that were never tried (nor sent) by ``parts``, numbered after the
    parts kept: a part sent, or tried and perhaps delivered, keeps its text and key. Returns the item."""
    import secrets  # here, not at import: the service's light start (``palui tools list``) sends nothing

    with db.write() as c:
        c.execute("DELETE FROM channel_outbox_parts WHERE item_id = ? AND ref IS NULL AND tried = 0", (item_id,))
        start = c.execute("SELECT COALESCE(MAX(n) + 1, 0) FROM channel_outbox_parts WHERE item_id = ?",
                          (item_id,)).fetchone()[0]
        c.executemany("INSERT INTO channel_outbox_parts (item_id, n, kind, text, key, approval_id, fingerprint)"
                      " VALUES (?,?,?,?,?,?,?)",
                      [(item_id, start + i, p["kind"], p["text"], secrets.token_hex(12), p.get("approval_id"),
                        p.get("fingerprint")) for i, p in enumerate(parts)])
    return item(db, item_id)


def trying(db: Database, part_id: int) -> None:
    """A send of the part starts: from now on it may reach the platform."""
    with db.write() as c:
        c.execute("UPDATE channel_outbox_parts SET tried = 1 WHERE id = ?", (part_id,))


def part_failed(db: Database, part_id: int, maybe_delivered: bool) -> None:
    """A send of the part failed; unless it may have been delivered (a timeout), it was not: the part may be
    rendered again."""
    if not maybe_delivered:
        with db.write() as c:
            c.execute("UPDATE channel_outbox_parts SET tried = 0 WHERE id = ? AND ref IS NULL", (part_id,))


def part_sent(db: Database, part_id: int, ref: str, now: float, *, state: str = "sent") -> bool:
    """Record a part as sent with the platform's ``ref``, and the message in ``channel_messages`` (what a
    reply, a reaction or a press on it refers to; ``state`` ``shown`` for an approval's live buttons), in one
    transaction; the item is ``sent`` once its last part is. Returns whether the item is complete (False
    also for a part already sent or gone)."""
    with db.write() as c:
        p = c.execute("SELECT p.*, o.channel, o.chat_id, o.turn_id, o.conversation_id FROM channel_outbox_parts p"
                      " JOIN channel_outbox o ON o.id = p.item_id WHERE p.id = ? AND p.ref IS NULL",
                      (part_id,)).fetchone()
        if p is None:
            return False
        c.execute("UPDATE channel_outbox_parts SET ref = ?, sent_at = ? WHERE id = ?", (ref, now, part_id))
        if p["kind"] != EDIT:  # an edit changes a message recorded already
            c.execute("INSERT INTO channel_messages (channel, chat_id, ref, kind, turn_id, conversation_id,"
                      " approval_id, fingerprint, state, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                      (p["channel"], p["chat_id"], ref, p["kind"], p["turn_id"], p["conversation_id"],
                       p["approval_id"], p["fingerprint"], state, now))
        left = c.execute("SELECT COUNT(*) FROM channel_outbox_parts WHERE item_id = ? AND ref IS NULL",
                         (p["item_id"],)).fetchone()[0]
        if left == 0:
            c.execute("UPDATE channel_outbox SET state = 'sent', done_at = ? WHERE id = ?", (now, p["item_id"]))
        return bool(left == 0)


def close(db: Database, item_id: int, state: str, now: float, error: str | None = None) -> None:
    """End a pending item without more sends: ``sent`` (an edit made), ``failed`` (refused by the platform,
    or failing too long) or ``dropped`` (nothing left to send)."""
    with db.write() as c:
        c.execute("UPDATE channel_outbox SET state = ?, error = ?, done_at = ? WHERE id = ? AND state = 'pending'",
                  (state, error, now, item_id))


def prune(db: Database, before: float, batch: int = 500) -> int:
    """Delete up to ``batch`` items written before ``before`` (epoch seconds), their parts with them:
    sent, failed and dropped ones, and pending ones that old (spec §10.2: kept like the inbox)."""
    with db.write() as c:
        return int(c.execute("DELETE FROM channel_outbox WHERE id IN (SELECT id FROM channel_outbox"
                             " WHERE created_at < ? ORDER BY created_at LIMIT ?)", (before, batch)).rowcount)


def forget_channel(c: sqlite3.Connection, channel: str) -> None:
    """Delete a removed channel's items (and their parts), inside the caller's transaction."""
    c.execute("DELETE FROM channel_outbox WHERE channel = ?", (channel,))
