"""Service part: what the email channel keeps besides every channel's records (spec §8.3; migration 40).

- **Answer addresses.** An approval mail's ``Reply-To`` is the channel's address with a 128-bit secret
  (``palui+a-SECRET@example.org``). Only the secret's SHA-256 is stored, with the approval and the
  fingerprint of the approval as the mail showed it (:func:`palui.channels.views.fingerprint`): a reply
  answers only while the approval is still what was shown, and :meth:`MailRecordsPart.spend_answer_address`
  spends an address once, in the transaction of the reply that used it. Addresses are kept 30 days.
- **Threads.** The person's latest mail on a chat (its ``Message-ID``, ``References`` and subject), so that
  Palui's answers and replies thread under it (``In-Reply-To``/``References``, ``Re:`` its subject).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palui.service.clock import Clock
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import MailAnswerAddress, MailThread

ADDRESS_KEEP_SECONDS = 30 * 86400.0


class MailRecordsPart:
    """The email channel's answer addresses and threads.

    Args:
        db, clock: the service's shared collaborators.
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def add_answer_address(self, name: str, secret_hash: str, approval_id: str, fingerprint: str) -> None:
        """Remember an answer address (its secret's SHA-256, hex) for the approval ``approval_id`` as shown with
        ``fingerprint``; the same hash again changes nothing (a part sent again after a crash). Addresses older
        than 30 days are forgotten."""
        now = self.clock.now()
        with self.db.write() as c:
            c.execute("INSERT OR IGNORE INTO mail_answer_addresses (channel, secret_hash, approval_id, fingerprint,"
                      " created_at) VALUES (?,?,?,?,?)", (name, secret_hash, approval_id, fingerprint, now))
            c.execute("DELETE FROM mail_answer_addresses WHERE created_at < ?", (now - ADDRESS_KEEP_SECONDS,))

    def spend_answer_address(self, name: str, secret_hash: str) -> MailAnswerAddress | None:
        """The answer address with that hash as it was (``used_at`` None: unused until now), marked used now;
        None for an address Palui never made (a forged one)."""
        with self.db.write() as c:
            r = c.execute("SELECT approval_id, fingerprint, used_at FROM mail_answer_addresses WHERE channel = ?"
                          " AND secret_hash = ?", (name, secret_hash)).fetchone()
            if r is None:
                return None
            if r["used_at"] is None:
                c.execute("UPDATE mail_answer_addresses SET used_at = ? WHERE channel = ? AND secret_hash = ?",
                          (self.clock.now(), name, secret_hash))
        return {"approval_id": r["approval_id"], "fingerprint": r["fingerprint"], "used_at": r["used_at"]}

    def thread(self, name: str, chat: str) -> MailThread | None:
        """The person's latest mail on ``chat`` (see the module docstring), or None."""
        r = self.db.one("SELECT message_id, refs, subject FROM mail_threads WHERE channel = ? AND chat_id = ?",
                        (name, chat))
        if r is None:
            return None
        return {"message_id": r["message_id"], "refs": r["refs"].split(), "subject": r["subject"]}

    def set_thread(self, name: str, chat: str, message_id: str, refs: list[str], subject: str) -> None:
        """Remember the person's latest mail on ``chat`` (in the caller's transaction when one is open)."""
        with self.db.write() as c:
            c.execute("INSERT INTO mail_threads (channel, chat_id, message_id, refs, subject, at) VALUES (?,?,?,?,?,?)"
                      " ON CONFLICT (channel, chat_id) DO UPDATE SET message_id = excluded.message_id,"
                      " refs = excluded.refs, subject = excluded.subject, at = excluded.at",
                      (name, chat, message_id, " ".join(refs[-20:]), subject, self.clock.now()))
