"""What is kept and for how long (spec §10.2 ``retention.days``): untrusted content, the inbox
and webhook deliveries are pruned; the audit log, turns and approvals are kept. The results gateway calls
returned (the untrusted content of gateway clients' conversations) are kept ``retention.gateway_days``
(:func:`prune_gateway`), also while a session of the client is open: a client's conversation lives until the
person clears it, and its calls are another agent's, not the person's.

Rows are deleted oldest first in batches through the time index of each table, so one batch costs
the same however much is stored, and the service's tick can prune a little every second without
holding the write lock for long. Untrusted content of a conversation that has a live turn
(running, awaiting approval or queued) is kept: a later call of that turn may still ask, and its
approval prompt marks argument values found in it (spec §4). A conversation whose untrusted content
is deleted is marked (``conversations.untrusted_pruned_at``, in the same transaction): the turns the
model is sent still hold that content, so the Rule of Two, which no longer sees the addresses it
named, asks for every address the person did not write (spec §4.5). Every delete goes through
:meth:`~palui.store.db.Database.write`.

A webhook delivery record is also a replay key (spec §8.5): a delivery signed over the body alone is
refused as a duplicate while its record is kept, for ``retention.days``; a Standard Webhooks record is
needed for 24 h. ``palui prune --before DATE`` deletes what is older than DATE, but never a replay key
before its own retention (:class:`ReplayKept`): pruning once let a captured delivery in again (202, a
second turn).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from palui.store.db import Database

#: (table, time column, the extra condition on a row that may go)
PRUNED: tuple[tuple[str, str, str], ...] = (
    ("untrusted_content", "created_at",
     "conversation_id NOT IN (SELECT conversation_id FROM turns WHERE status IN"
     " ('running','awaiting_approval','queued'))"),
    ("inbox", "time", "1"),
    ("webhook_deliveries", "received_at", "1"),
)
BATCH = 500  # rows per table per tick


@dataclass(frozen=True)
class ReplayKept:
    """Until when a webhook delivery record still refuses a replay (epoch seconds): a body-only one (it
    has a ``content_key``) received after ``body_only_since``, a Standard Webhooks one after ``timed_since``."""

    body_only_since: float
    timed_since: float


def prune(db: Database, before: float, batch: int | None = BATCH, replay: ReplayKept | None = None) -> dict[str, int]:
    """Delete pruned rows older than ``before`` (epoch seconds): at most ``batch`` rows per table, or
    every one when ``batch`` is None (in batches of :data:`BATCH`, each its own transaction). With
    ``replay``, webhook delivery records still needed as replay keys are kept whatever ``before`` says.
    Returns the rows deleted per table."""
    out = {}
    now = time.time()
    for table, col, keep in PRUNED:
        if table == "webhook_deliveries" and replay is not None:
            keep = (f"((content_key IS NOT NULL AND received_at <= {float(replay.body_only_since)!r})"
                    f" OR (content_key IS NULL AND received_at <= {float(replay.timed_since)!r}))")
        total = 0
        while True:
            n = BATCH if batch is None else batch
            with db.write() as c:
                chosen = f"SELECT rowid FROM {table} WHERE {col} < ? AND {keep} ORDER BY {col} LIMIT ?"
                if table == "untrusted_content":
                    c.execute("UPDATE conversations SET untrusted_pruned_at = ? WHERE id IN"
                              f" (SELECT conversation_id FROM {table} WHERE rowid IN ({chosen}))", (now, before, n))
                deleted = c.execute(f"DELETE FROM {table} WHERE rowid IN ({chosen})", (before, n)).rowcount
            total += deleted
            if batch is not None or deleted < n:
                break
        out[table] = total
    return out


#: Untrusted content of gateway clients' conversations (the results their calls returned). A client's
#: conversations are named by its sessions' rows (kept, ended or not), so the growing ``conversations`` table is
#: not scanned for its origin.
GATEWAY = ("SELECT rowid FROM untrusted_content WHERE created_at < ? AND conversation_id IN"
           " (SELECT conversation_id FROM gateway_sessions) ORDER BY created_at LIMIT ?")


def prune_gateway(db: Database, before: float, batch: int | None = BATCH) -> int:
    """Delete the untrusted content of gateway clients' conversations older than ``before`` (epoch seconds), live
    sessions or not, marking their conversations pruned (the Rule of Two then asks for every address, as it
    already does for a gateway client): at most ``batch`` rows, or all of them when ``batch`` is None. Returns the
    rows deleted."""
    total, now = 0, time.time()
    while True:
        n = BATCH if batch is None else batch
        with db.write() as c:
            c.execute("UPDATE conversations SET untrusted_pruned_at = ? WHERE id IN"
                      f" (SELECT conversation_id FROM untrusted_content WHERE rowid IN ({GATEWAY}))", (now, before, n))
            deleted = c.execute(f"DELETE FROM untrusted_content WHERE rowid IN ({GATEWAY})", (before, n)).rowcount
        total += deleted
        if batch is not None or deleted < n:
            return total
