"""Migrations of what must survive a fault: body-only webhook replay keys kept for ``retention.days``
(spec §8.5) and the audit's count and head kept beside the chain (spec §10.3).

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
Each number is written once, in the constant beside it, so a merge that renumbers changes one line.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

INTEGRITY_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = []

#: The webhook replay keys of body-only deliveries are kept (spec §8.5).
WEBHOOK_REPLAY_KEYS = 32
#: The audit's count, first and last row beside the chain, and a chain version per row (spec §10.3).
AUDIT_STATE = 33

REPLAY_NOTICE = (
    "Webhooks: a delivery signed over the body alone (X-Palui-Signature, GitHub's X-Hub-Signature-256) or sent "
    "with the bearer secret was remembered for 24 h only, so a captured delivery could be sent again a day later. "
    "Palui now remembers it for retention.days. Only a signed timestamp bounds replay: a sender that can use "
    "Standard Webhooks should (see palui webhooks show NAME).")


def _keep_replay_keys(c: sqlite3.Connection) -> None:
    """The partial index lets the 24 h cleanup of Standard Webhooks records skip the body-only records
    now kept for ``retention.days``; the person is told once, when they have a webhook."""
    c.execute("CREATE INDEX webhook_deliveries_timed ON webhook_deliveries(received_at) WHERE content_key IS NULL")
    if c.execute("SELECT 1 FROM webhooks LIMIT 1").fetchone():
        c.execute("INSERT INTO inbox (time, kind, text) VALUES (?, 'notice', ?)", (time.time(), REPLAY_NOTICE))


INTEGRITY_MIGRATIONS.append(
    (WEBHOOK_REPLAY_KEYS, "keep the replay keys of body-only webhook deliveries for retention.days", _keep_replay_keys)
)


def _audit_state(c: sqlite3.Connection) -> None:
    """The ``audit_state`` row is filled from the rows the audit holds at upgrade (it can only vouch for
    what was there then)."""
    c.execute("""
CREATE TABLE audit_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),  -- one row
    rows       INTEGER NOT NULL,                     -- audit rows ever written (the log is never pruned)
    first_id   INTEGER,                              -- the chain's first row, NULL while the log is empty
    last_id    INTEGER,                              -- the last row written, and its hash
    last_hash  TEXT
)""")
    # which columns a row's hash covers (store/audit_chain.py COLUMNS): rows written so far are version 1
    c.execute("ALTER TABLE audit ADD COLUMN chain_version INTEGER NOT NULL DEFAULT 1")
    count, first, last = c.execute("SELECT COUNT(*), MIN(id), MAX(id) FROM audit").fetchone()
    last_hash = c.execute("SELECT hash FROM audit WHERE id = ?", (last,)).fetchone() if last is not None else None
    c.execute("INSERT INTO audit_state (id, rows, first_id, last_id, last_hash) VALUES (1, ?, ?, ?, ?)",
              (count, first, last, last_hash[0] if last_hash else None))


INTEGRITY_MIGRATIONS.append(
    (AUDIT_STATE, "the audit's count and last row beside the chain, and a chain version per row", _audit_state)
)
