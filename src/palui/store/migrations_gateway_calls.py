"""Migration 50 (spec §8.6, §10.3): the gateway complete.

- A client's own hourly cap (``gateway_clients.calls_per_hour``; NULL: ``caps.gateway_client_calls_per_hour``)
  and the counters behind every gateway cap: ``gateway_call_minutes`` holds the calls sent to a connector per
  client and minute (client ``''``: every client, the ceiling ``caps.gateway_calls_per_hour``), so a check reads
  at most 61 rows of one primary-key range whatever the history (decision 0072's rule for the turn caps).
- The audit's ``client`` and ``session`` columns (chain version 2, :mod:`palui.store.audit_chain`): a gateway
  call's row names them in columns of their own; the rows written before keep version 1 and verify unchanged.
- ``gateway_sessions.last_used_at``: when the session last made a request (``palui gateway sessions``, and which
  session ends first when a client opens more than ``gateway.sessions_per_client``).
- ``approvals_args``: an approval found by its arguments' hash, for a client's identical retry in any session.

Appended to :data:`palui.store.migrations.MIGRATIONS`; never edited once shipped. Its number is written once, in
:data:`NUMBER`, so renumbering it on a merge is a one-line change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

NUMBER = 50

GATEWAY_CALLS_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        NUMBER,
        "gateway caps per client (counted per minute), audit client and session columns, sessions' last use",
        """
ALTER TABLE gateway_clients ADD COLUMN calls_per_hour INTEGER;  -- NULL: caps.gateway_client_calls_per_hour
CREATE TABLE gateway_call_minutes (
    client  TEXT NOT NULL,     -- the client's name; '' counts every client's calls (the ceiling)
    minute  INTEGER NOT NULL,  -- CAST(epoch seconds / 60 AS INTEGER)
    calls   INTEGER NOT NULL,  -- calls sent to a connector in that minute
    PRIMARY KEY (client, minute)
) WITHOUT ROWID;
ALTER TABLE audit ADD COLUMN client TEXT;   -- the gateway client that made the call (chain version 2)
ALTER TABLE audit ADD COLUMN session TEXT;  -- its gateway session (chain version 2)
ALTER TABLE gateway_sessions ADD COLUMN last_used_at REAL;
CREATE INDEX gateway_sessions_client ON gateway_sessions(client, ended_at);
CREATE INDEX approvals_args ON approvals(args_hash);
CREATE INDEX audit_session ON audit(session) WHERE session IS NOT NULL;  -- palui gateway sessions counts its calls
""",
    )
]
