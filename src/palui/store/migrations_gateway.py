"""Migration 37 (spec §8.6): the gateway's named clients (tokens hashed at rest) and its sessions.

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
Its number is written once, in :data:`NUMBER`, so renumbering it on a merge is a one-line change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

NUMBER = 37

GATEWAY_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        NUMBER,
        "gateway clients (named, a token hashed at rest) and gateway sessions (a conversation and one turn row each)",
        """
CREATE TABLE gateway_clients (
    name            TEXT PRIMARY KEY,
    token_hash      TEXT NOT NULL UNIQUE,      -- SHA-256 hex of the token: the token itself is shown once
    connectors_json TEXT,                      -- the connectors it sees (JSON list); NULL: every connector
    context         TEXT NOT NULL DEFAULT 'unknown',  -- unknown (sessions start tainted) | trusted
    created_at      REAL NOT NULL
);
CREATE TABLE gateway_sessions (
    id              TEXT PRIMARY KEY,          -- g-<hex>
    client          TEXT NOT NULL,             -- the client's name (kept when the client is removed)
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    turn_id         TEXT NOT NULL REFERENCES turns(id),
    created_at      REAL NOT NULL,
    ended_at        REAL,
    end_reason      TEXT
);
CREATE INDEX gateway_sessions_turn ON gateway_sessions(turn_id);
CREATE INDEX audit_origin_time ON audit(origin, time);  -- caps.gateway_calls_per_hour counts the last hour
""",
    )
]
