"""Migration 15 (spec §8.3): the chat channels' tables.

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

CHANNEL_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = []

CHANNEL_MIGRATIONS.append(
    (
        15,
        "chat channels: channels, pairing codes, processed updates, cursors, chats, sent messages,"
        " strangers; the person's reason for a denial",
        """
CREATE TABLE channels (
    name           TEXT PRIMARY KEY,            -- telegram, matrix, or the --name given
    kind           TEXT NOT NULL,               -- telegram | matrix
    config_json    TEXT NOT NULL DEFAULT '{}',  -- homeserver, user id, device id, api base; secrets live in files
    person_id      TEXT,                        -- the paired account (Telegram user id, Matrix user id)
    person_name    TEXT,
    person_chat    TEXT,                        -- the private chat / room where the person paired
    paired_at      REAL,
    allow_groups   INTEGER NOT NULL DEFAULT 0,  -- group chats and rooms with other members
    state          TEXT NOT NULL DEFAULT 'unpaired',
    state_at       REAL,
    last_failure   TEXT,                        -- the last delivery failure (redacted), shown in /status
    last_failure_at REAL,
    created_at     REAL NOT NULL
);
CREATE TABLE channel_pairing (
    channel    TEXT PRIMARY KEY,
    code_hash  TEXT NOT NULL,                   -- SHA-256 of the one-time code
    expires_at REAL NOT NULL,
    tries_left INTEGER NOT NULL
);
CREATE TABLE channel_updates (
    channel TEXT NOT NULL,
    key     TEXT NOT NULL,                      -- Telegram update_id, Matrix event id, or a notice key
    seq     INTEGER,                            -- the numeric id where there is one (Telegram's offset)
    outcome TEXT NOT NULL,                      -- done | failed: … | malformed | ignored
    seen_at REAL NOT NULL,
    PRIMARY KEY (channel, key)
);
CREATE INDEX channel_updates_seq ON channel_updates(channel, seq);
CREATE TABLE channel_cursors (
    channel TEXT PRIMARY KEY,
    cursor  TEXT NOT NULL,                      -- Matrix next_batch
    at      REAL NOT NULL
);
CREATE TABLE channel_chats (
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    conversation_id TEXT NOT NULL,              -- the chat's current conversation (/new starts another)
    updated_at      REAL NOT NULL,
    PRIMARY KEY (channel, chat_id)
);
CREATE TABLE channel_messages (
    id              INTEGER PRIMARY KEY,
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    ref             TEXT NOT NULL,              -- Telegram message_id, Matrix event id
    kind            TEXT NOT NULL,              -- answer | approval | approval-args | job | webhook | notice | …
    turn_id         TEXT,
    conversation_id TEXT,
    approval_id     TEXT,
    fingerprint     TEXT,                       -- of the approval as shown (spec §8.3)
    state           TEXT NOT NULL DEFAULT 'sent', -- sent | shown (approval buttons live) | closed
    created_at      REAL NOT NULL
);
CREATE INDEX channel_messages_ref ON channel_messages(channel, chat_id, ref);
CREATE INDEX channel_messages_approval ON channel_messages(approval_id);
CREATE TABLE channel_strangers (
    channel   TEXT NOT NULL,
    sender    TEXT NOT NULL,
    logged_at REAL NOT NULL,                    -- logged at most once a day
    PRIMARY KEY (channel, sender)
);
ALTER TABLE approvals ADD COLUMN deny_reason TEXT;  -- /deny ID REASON: what the model is told
""",
    )
)
