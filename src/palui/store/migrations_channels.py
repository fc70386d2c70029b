"""Migrations 15, 34, 38 and 40 (spec §8.3): the chat channels' tables, their durable outbox, when a
platform refused a channel's credentials, and the email channel's answer addresses and threads.

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


#: The durable outbox's migration (spec §8.3). Its number is here only: renumbered in one line on merge.
OUTBOX_MIGRATION = 34

CHANNEL_MIGRATIONS.append(
    (
        OUTBOX_MIGRATION,
        "chat channels: the durable outbox and its parts, invites waiting for a pairing code, wrong pairing tries",
        """
CREATE TABLE channel_outbox (
    id              INTEGER PRIMARY KEY,
    channel         TEXT NOT NULL,
    chat_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,              -- answer | approval | edit | reply | job | webhook | notice | …
    subject         TEXT,                       -- the turn of an answer, the approval of an ask or an edit
    text            TEXT,                       -- a notice's or a reply's text (rendered when sent)
    target_ref      TEXT,                       -- edit: the message to replace
    turn_id         TEXT,
    conversation_id TEXT,
    state           TEXT NOT NULL DEFAULT 'pending', -- pending | sent | failed | dropped
    error           TEXT,                       -- why it failed or was dropped (redacted)
    created_at      REAL NOT NULL,
    done_at         REAL
);
CREATE INDEX channel_outbox_pending ON channel_outbox(channel, state, id);
CREATE INDEX channel_outbox_created ON channel_outbox(created_at);
CREATE TABLE channel_outbox_parts (
    id          INTEGER PRIMARY KEY,
    item_id     INTEGER NOT NULL REFERENCES channel_outbox(id) ON DELETE CASCADE,
    n           INTEGER NOT NULL,               -- the order in which the parts are sent
    kind        TEXT NOT NULL,                  -- what the message is: answer, approval, approval-args, notice…
    text        TEXT NOT NULL,                  -- as rendered by the channel (plain, escaped for display)
    key         TEXT NOT NULL,                  -- random, stable: Matrix's transaction id for this part
    approval_id TEXT,                           -- the approval whose buttons this part carries
    fingerprint TEXT,
    tried       INTEGER NOT NULL DEFAULT 0,     -- a send was on its way when last seen (kept across a crash)
    ref         TEXT,                           -- the platform's message id, once sent
    sent_at     REAL
);
CREATE INDEX channel_outbox_parts_item ON channel_outbox_parts(item_id, n);
CREATE TABLE channel_invites (
    channel    TEXT NOT NULL,
    room_id    TEXT NOT NULL,
    inviter    TEXT,
    invited_at REAL NOT NULL,                   -- joined once a pairing code is live
    PRIMARY KEY (channel, room_id)
);
ALTER TABLE channel_pairing ADD COLUMN wrong_json TEXT NOT NULL DEFAULT '{}';  -- wrong tries per sender
""",
    )
)

CHANNEL_MIGRATIONS.append(
    (
        38,
        "chat channels: when the platform refused a channel's credentials (the person is told once)",
        "ALTER TABLE channels ADD COLUMN refused_at REAL;  -- the platform refuses the token; cleared when it works",
    )
)

CHANNEL_MIGRATIONS.append(
    (
        40,
        "the email channel: approval answer addresses (a hash of each secret, single use) and mail threads",
        """
CREATE TABLE mail_answer_addresses (
    channel     TEXT NOT NULL,
    secret_hash TEXT NOT NULL,                  -- SHA-256 of the 128-bit secret in palui+a-SECRET@…
    approval_id TEXT NOT NULL,
    fingerprint TEXT NOT NULL,                  -- of the approval as the mail showed it
    created_at  REAL NOT NULL,
    used_at     REAL,                           -- set by the one reply that answered with it
    PRIMARY KEY (channel, secret_hash)
);
CREATE INDEX mail_answer_addresses_created ON mail_answer_addresses(created_at);
CREATE TABLE mail_threads (
    channel    TEXT NOT NULL,
    chat_id    TEXT NOT NULL,                   -- the person's address
    message_id TEXT NOT NULL,                   -- of the person's latest mail: Palui's replies thread under it
    refs       TEXT NOT NULL DEFAULT '',        -- its References, space-separated
    subject    TEXT NOT NULL DEFAULT '',
    at         REAL NOT NULL,
    PRIMARY KEY (channel, chat_id)
);
""",
    )
)
