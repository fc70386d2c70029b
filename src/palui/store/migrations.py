"""Numbered schema migrations, applied in order and recorded in ``schema_migrations``.

:data:`MIGRATIONS` holds this module's migrations and those of the modules it includes, one per
topic: ``migrations_costs`` (per-turn cost independent of history and catalog size: 11–14, 31, 35; cached
input apart: 45), ``migrations_channels`` (the chat channels and their outbox: 15, 34, 38; the email channel:
40), ``migrations_mcp`` (questions from MCP servers, task support, the sign-in state: 20–22; secret questions:
36; scope step-ups: 44), ``migrations_governance`` (the audit chain, the Rule of Two, job scopes: 25–29),
``migrations_integrity`` (webhook replay keys kept, the audit's count: 32–33), ``migrations_gateway`` (the
gateway's clients and sessions: 37), ``migrations_governed`` (a gateway client's state across sessions, strict
JSON at rest, flagged input schemas: 42–43), ``migrations_gateway_calls`` (the gateway's caps per client, the
audit's client and session: 50) and ``migrations_standing`` (standing approvals, "deny and stop": 52). They run
in number order, each once; never edit one that has shipped.

Unused numbers: 2, 3, 16–19, 23, 24, 39, 41, 46–49, 51. They were handed out to work that did not need them and
stay unused, so that no database ever records them for something else (41, 46–49 and 51 are other branches' of the
same round: whichever lands fills them). New migrations take numbers above
36, in the order they land on main: the next one to land takes the highest number in use plus one,
whichever branch wrote it first.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

from palui.store.migrations_channels import CHANNEL_MIGRATIONS
from palui.store.migrations_costs import COST_MIGRATIONS
from palui.store.migrations_gateway import GATEWAY_MIGRATIONS
from palui.store.migrations_gateway_calls import GATEWAY_CALLS_MIGRATIONS
from palui.store.migrations_governance import GOVERNANCE_MIGRATIONS
from palui.store.migrations_governed import GOVERNED_MIGRATIONS
from palui.store.migrations_integrity import INTEGRITY_MIGRATIONS
from palui.store.migrations_mcp import MCP_MIGRATIONS
from palui.store.migrations_standing import STANDING_MIGRATIONS

#: (number, name, SQL text or a function of the connection, run inside the migrating transaction)
MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        1,
        "connectors, tools, memories, tasks, conversations, turns, approvals, audit, inbox, usage",
        """
CREATE TABLE connectors (
    id             TEXT PRIMARY KEY,          -- recall, tasks, web, messages, mcp-<slug>
    kind           TEXT NOT NULL,             -- builtin | mcp
    name           TEXT NOT NULL,             -- the name the person gave
    transport      TEXT,                      -- stdio | http (mcp only)
    config_json    TEXT NOT NULL DEFAULT '{}',-- command/args/url; secrets live in files of mode 0600
    trusted_source INTEGER NOT NULL DEFAULT 0,
    enabled        INTEGER NOT NULL DEFAULT 1,
    state          TEXT NOT NULL DEFAULT 'connected',
    created_at     REAL NOT NULL
);
CREATE TABLE tools (
    connector_id     TEXT NOT NULL REFERENCES connectors(id) ON DELETE CASCADE,
    raw_name         TEXT NOT NULL,           -- the tool's name as its connector lists it
    name             TEXT NOT NULL UNIQUE,    -- model-visible <connectorId>__<tool>
    description      TEXT NOT NULL DEFAULT '',
    input_schema     TEXT NOT NULL DEFAULT '{}',
    annotations      TEXT,                    -- raw annotations JSON exactly as sent, NULL if none
    definition_hash  TEXT NOT NULL DEFAULT '',
    user_class       TEXT,                    -- the person's choice
    base_class       TEXT,                    -- builtin declaration or hints prefill
    base_source      TEXT,                    -- builtin | hints | NULL
    enabled          INTEGER NOT NULL DEFAULT 0,
    untrusted_output INTEGER NOT NULL DEFAULT 1,
    trusted_source   INTEGER NOT NULL DEFAULT 0,
    changed          INTEGER NOT NULL DEFAULT 0,
    review_json      TEXT,                    -- the new definition waiting for review
    present          INTEGER NOT NULL DEFAULT 1, -- still listed by its server
    created_at       REAL NOT NULL,
    updated_at       REAL NOT NULL,
    PRIMARY KEY (connector_id, raw_name)
);
CREATE TABLE memories (
    id          INTEGER PRIMARY KEY,
    text        TEXT NOT NULL,
    provenance  TEXT NOT NULL,                -- trusted | untrusted
    source      TEXT,                         -- what wrote it (turn, tool, taint source)
    turn_id     TEXT,
    created_at  REAL NOT NULL
);
CREATE VIRTUAL TABLE memories_fts USING fts5(text, content='memories', content_rowid='id');
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TABLE tasks (
    id          INTEGER PRIMARY KEY,
    title       TEXT NOT NULL,
    notes       TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'open', -- open | done
    due         TEXT,
    provenance  TEXT NOT NULL,
    source      TEXT,
    turn_id     TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
CREATE TABLE conversations (
    id            TEXT PRIMARY KEY,
    origin        TEXT NOT NULL,
    tainted       INTEGER NOT NULL DEFAULT 0,
    taint_source  TEXT,
    created_at    REAL NOT NULL
);
CREATE TABLE turns (
    id              TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id),
    origin          TEXT NOT NULL,
    status          TEXT NOT NULL,
    input           TEXT NOT NULL,
    model           TEXT,
    messages_json   TEXT NOT NULL DEFAULT '[]', -- this turn's model messages (pydantic-ai JSON)
    offered_json    TEXT,                       -- the tools offered, fixed at the start
    pending_json    TEXT,                       -- tool calls of the last response still to decide
    tainted         INTEGER NOT NULL DEFAULT 0,
    taint_source    TEXT,
    steps           INTEGER NOT NULL DEFAULT 0,
    seconds         REAL NOT NULL DEFAULT 0,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    answer          TEXT,
    error           TEXT,
    job_id          TEXT,
    webhook_id      TEXT,
    version         INTEGER NOT NULL DEFAULT 0, -- compare-and-set guard (spec §5)
    owner           TEXT,                       -- which process runs it now
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE INDEX turns_conversation ON turns(conversation_id, created_at);
CREATE INDEX turns_status ON turns(status);
CREATE TABLE untrusted_content (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    turn_id         TEXT NOT NULL,
    source          TEXT NOT NULL,              -- e.g. "web__fetch_page at step 3"
    text            TEXT NOT NULL,
    created_at      REAL NOT NULL
);
CREATE INDEX untrusted_conversation ON untrusted_content(conversation_id);
CREATE TABLE approvals (
    id             TEXT PRIMARY KEY,
    turn_id        TEXT NOT NULL REFERENCES turns(id),
    tool_call_id   TEXT NOT NULL,
    tool           TEXT NOT NULL,               -- model-visible name
    class          TEXT NOT NULL,
    class_source   TEXT NOT NULL,
    origin         TEXT NOT NULL,
    reason         TEXT NOT NULL,
    args_json      TEXT NOT NULL,               -- canonical JSON of the exact arguments
    args_hash      TEXT NOT NULL,
    untrusted_args TEXT NOT NULL DEFAULT '[]',
    status         TEXT NOT NULL,               -- pending | approved | denied | expired | cancelled
    created_at     REAL NOT NULL,
    expires_at     REAL NOT NULL,
    answered_at    REAL,
    used           INTEGER NOT NULL DEFAULT 0   -- the approved call has been executed
);
CREATE INDEX approvals_status ON approvals(status);
CREATE TABLE audit (
    id           INTEGER PRIMARY KEY,
    time         REAL NOT NULL,
    turn_id      TEXT,
    tool         TEXT NOT NULL,
    class        TEXT,
    class_source TEXT,
    origin       TEXT,
    tainted      INTEGER NOT NULL DEFAULT 0,
    verdict      TEXT NOT NULL,
    reason       TEXT NOT NULL,
    args_hash    TEXT,
    outcome      TEXT NOT NULL,
    duration_ms  REAL
);
CREATE INDEX audit_turn ON audit(turn_id);
CREATE TABLE inbox (
    id              INTEGER PRIMARY KEY,
    time            REAL NOT NULL,
    kind            TEXT NOT NULL,             -- answer | approval | job | webhook | cap | notice | message
    text            TEXT NOT NULL,
    turn_id         TEXT,
    conversation_id TEXT
);
CREATE TABLE usage (
    id        INTEGER PRIMARY KEY,
    time      REAL NOT NULL,
    day       TEXT NOT NULL,                   -- YYYY-MM-DD in the caps time zone
    turn_id   TEXT,
    job_id    TEXT,
    tokens    INTEGER NOT NULL
);
CREATE INDEX usage_day ON usage(day);
CREATE TABLE runs (
    id        INTEGER PRIMARY KEY,
    time      REAL NOT NULL,
    turn_id   TEXT NOT NULL,
    origin    TEXT NOT NULL
);
CREATE INDEX runs_time ON runs(time);
CREATE TABLE kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
""",
    ),
]

MIGRATIONS.append(
    (
        5,
        "turn events and stop requests",
        """
CREATE TABLE turn_events (
    turn_id  TEXT NOT NULL,
    seq      INTEGER NOT NULL,                -- 0, 1, 2… within the turn, across resumes
    event    TEXT NOT NULL,                   -- JSON: step, tool_call, approval, tainted, text, end…
    PRIMARY KEY (turn_id, seq)
);
ALTER TABLE turns ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0;
ALTER TABLE turns ADD COLUMN budget_hit TEXT;
""",
    )
)

MIGRATIONS.append(
    (
        4,
        "scheduled jobs, webhooks and webhook deliveries (replay protection, rate limit)",
        """
CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,          -- j-<hex>, used as turns.job_id and usage.job_id
    name            TEXT NOT NULL UNIQUE,
    cron            TEXT NOT NULL,             -- five-field cron expression or @daily-style alias
    prompt          TEXT NOT NULL,
    token_cap       INTEGER,                   -- per-job daily token cap; NULL = caps.job_daily_tokens
    tz              TEXT,                      -- zone of the cron expression; NULL = caps.timezone / system
    next_run        REAL NOT NULL,             -- epoch seconds of the next due run (scheduler clock)
    last_run        REAL,                      -- epoch seconds when the last run was started
    last_turn_id    TEXT,
    postponed_by    TEXT,                      -- the cap that postponed next_run, NULL when on schedule
    skip_noted_turn TEXT,                      -- the waiting turn whose skipped ticks were noted
    created_at      REAL NOT NULL
);
CREATE TABLE webhooks (
    id          TEXT PRIMARY KEY,              -- the <id> of /hooks/<id>; the secret is in a 0600 file
    name        TEXT NOT NULL UNIQUE,
    created_at  REAL NOT NULL
);
CREATE TABLE webhook_deliveries (
    webhook_id    TEXT NOT NULL,
    delivery_key  TEXT NOT NULL,               -- hash of the delivery-id header, else of signature + body
    body_sha256   TEXT NOT NULL,
    body_bytes    INTEGER NOT NULL,
    turn_id       TEXT,
    received_at   REAL NOT NULL,
    PRIMARY KEY (webhook_id, delivery_key)
);
CREATE INDEX webhook_deliveries_time ON webhook_deliveries(webhook_id, received_at);
""",
    )
)
# Memory and task ids are never given out twice: with a plain INTEGER PRIMARY KEY, SQLite
# reuses the highest id after a delete, so an approval still waiting for
# recall__forget_memory {"id": 1} could delete a newer memory that got id 1. The tables are
# rebuilt with AUTOINCREMENT (rows and ids kept); the FTS5 index over memories is rebuilt
# and its triggers created again on the new table. Ids deleted above the highest surviving
# one before this migration may still be given out once more (SQLite kept no record of them).
MIGRATIONS.append(
    (
        6,
        "memory and task ids never reused (AUTOINCREMENT)",
        """
DROP TRIGGER memories_ai;
DROP TRIGGER memories_ad;
DROP TRIGGER memories_au;
CREATE TABLE memories_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    text        TEXT NOT NULL,
    provenance  TEXT NOT NULL,                -- trusted | untrusted
    source      TEXT,                         -- what wrote it (turn, tool, taint source)
    turn_id     TEXT,
    created_at  REAL NOT NULL
);
INSERT INTO memories_new (id, text, provenance, source, turn_id, created_at)
    SELECT id, text, provenance, source, turn_id, created_at FROM memories ORDER BY id;
DROP TABLE memories;
ALTER TABLE memories_new RENAME TO memories;
CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memories_au AFTER UPDATE OF text ON memories BEGIN
    INSERT INTO memories_fts(memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memories_fts(rowid, text) VALUES (new.id, new.text);
END;
INSERT INTO memories_fts(memories_fts) VALUES('rebuild');
CREATE TABLE tasks_new (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    title       TEXT NOT NULL,
    notes       TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT 'open', -- open | done
    due         TEXT,
    provenance  TEXT NOT NULL,
    source      TEXT,
    turn_id     TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);
INSERT INTO tasks_new (id, title, notes, status, due, provenance, source, turn_id, created_at, updated_at)
    SELECT id, title, notes, status, due, provenance, source, turn_id, created_at, updated_at FROM tasks ORDER BY id;
DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;
""",
    )
)
MIGRATIONS.append(
    (
        7,
        "one turn at a time per conversation (turns.queued_behind), approvals answered_via and cancel_reason,"
        " runs by turn",
        """
ALTER TABLE turns ADD COLUMN queued_behind TEXT;        -- the live turn of the conversation it waited behind
ALTER TABLE approvals ADD COLUMN answered_via TEXT;     -- cli | web | api | a channel's name
ALTER TABLE approvals ADD COLUMN cancel_reason TEXT;    -- why it was cancelled (/stop, re-decided, …)
CREATE INDEX runs_turn ON runs(turn_id);
""",
    )
)
def _switch_off_hidden(c: sqlite3.Connection) -> None:
    """Tools stored before hidden characters were flagged (spec §4.7): any whose name,
    description, schema or annotations hold one is switched off, and the person is told."""
    from palui.text.display import hidden_in

    names = []
    for r in c.execute("SELECT connector_id, raw_name, name, description, input_schema, annotations, enabled"
                       " FROM tools").fetchall():
        parts = [r[1], r[3], json.loads(r[4] or "{}"), json.loads(r[5]) if r[5] else None]
        if hidden_in(parts) and r[6]:
            c.execute("UPDATE tools SET enabled = 0 WHERE connector_id = ? AND raw_name = ?", (r[0], r[1]))
            names.append(r[2])
    if names:
        c.execute("INSERT INTO inbox (time, kind, text) VALUES (?, 'notice', ?)",
                  (time.time(), f"Switched off {len(names)} tool(s) whose definition has hidden characters: "
                   f"{', '.join(names)}. Look at each with palui tools show NAME (it shows them escaped) before "
                   "switching it on again."))


MIGRATIONS.append(
    (
        9,
        "tools with hidden characters: acknowledged definition, and those already stored switched off",
        """
ALTER TABLE tools ADD COLUMN hidden_ack TEXT;  -- definition_hash the person saw escaped (palui tools show)
""",
    )
)
MIGRATIONS.append((10, "switch off stored tools with hidden characters and tell the person", _switch_off_hidden))

# spec §8.5: a delivery is a duplicate when the hash of its signature and body was seen, or its
# delivery id was; the two keys get their own columns (delivery_key stays the row's name). Rows
# stored before are named by one of the two, which is copied into its column (they expire in 24 h).
# runs(origin, time) counts the webhook share of the hourly runs.
MIGRATIONS.append(
    (
        8,
        "webhook deliveries keyed by signature and body and by delivery id; runs by origin",
        """
ALTER TABLE webhook_deliveries ADD COLUMN content_key TEXT;  -- 'sig:' sha256 of signature + body (NULL: Std Webhooks)
ALTER TABLE webhook_deliveries ADD COLUMN delivery_id TEXT;  -- 'id:' sha256 of the delivery id, NULL when none was sent
UPDATE webhook_deliveries SET content_key = delivery_key WHERE delivery_key LIKE 'sig:%';
UPDATE webhook_deliveries SET delivery_id = delivery_key WHERE delivery_key LIKE 'id:%';
CREATE INDEX webhook_deliveries_content ON webhook_deliveries(webhook_id, content_key);
CREATE INDEX webhook_deliveries_id ON webhook_deliveries(webhook_id, delivery_id);
CREATE INDEX runs_origin_time ON runs(origin, time);
""",
    )
)

MIGRATIONS.append(
    (
        30,
        "conversations remember the channel they were started on (palui conversations, chat --resume)",
        """
ALTER TABLE conversations ADD COLUMN channel TEXT;  -- terminal | cli | web | api | job | webhook | a chat app's name
UPDATE conversations SET channel = origin WHERE origin IN ('job', 'webhook');
UPDATE conversations SET channel = (SELECT cc.channel FROM channel_chats cc WHERE cc.conversation_id = conversations.id
                                    LIMIT 1)
 WHERE channel IS NULL AND id IN (SELECT conversation_id FROM channel_chats);
""",
    )
)


# Per-turn cost independent of history and catalog size (11-14, 31), reads bounded by what waits (35), cached
# input kept apart from what the caps count (45).
MIGRATIONS.extend(COST_MIGRATIONS)
# The chat channels (15, 34, 38, 40): their tables, the durable outbox, refused credentials, the email channel's
# answer addresses and threads.
MIGRATIONS.extend(CHANNEL_MIGRATIONS)
# Governance (25-29): the audit chain, the Rule of Two, jobs limited to connectors.
MIGRATIONS.extend(GOVERNANCE_MIGRATIONS)

# Remote MCP servers (20-22, 36, 44): questions from servers, task support, the sign-in state in the catalog,
# secret questions, scope step-ups.
MIGRATIONS.extend(MCP_MIGRATIONS)
# What must survive a fault (32-33): body-only webhook replay keys kept, the audit's count beside the chain.
MIGRATIONS.extend(INTEGRITY_MIGRATIONS)

# The gateway (37): its clients and sessions.
MIGRATIONS.extend(GATEWAY_MIGRATIONS)
# One governed call for every door (42-43): a gateway client's state across sessions; strict JSON at rest, and
# tools' flagged input schemas.
MIGRATIONS.extend(GOVERNED_MIGRATIONS)
# The gateway complete (50): caps per client and their counters, the audit's client and session columns.
MIGRATIONS.extend(GATEWAY_CALLS_MIGRATIONS)
# Fewer asks at the same safety (52): standing approvals, asks answered by them, "deny and stop".
MIGRATIONS.extend(STANDING_MIGRATIONS)

# Migration numbers are handed out to parallel work and may be appended out of order: keep the list sorted.
MIGRATIONS.sort(key=lambda m: m[0])
