"""Migrations 20-22, 36 and 44 (spec §7.7-§7.11): questions of MCP servers, task support, the sign-in state in the
catalog, whether a connector may ask for secrets, and scope step-ups waiting for the person.

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

MCP_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = []

# A server's question to the person (MCP elicitation) waits where approvals wait (spec §7.8).
MCP_MIGRATIONS.append(
    (
        20,
        "elicitations: questions of MCP servers to the person, durable like approvals",
        """
CREATE TABLE elicitations (
    id            TEXT PRIMARY KEY,            -- e-<hex>
    turn_id       TEXT NOT NULL REFERENCES turns(id),
    tool_call_id  TEXT NOT NULL,               -- the model's call during which the server asked
    tool          TEXT NOT NULL,               -- model-visible name of that call's tool
    connector_id  TEXT NOT NULL,
    era           TEXT NOT NULL,               -- input_required (2026-07-28, durable) | in_call (older era)
    round         INTEGER NOT NULL DEFAULT 1,  -- input-required round of the call
    request_key   TEXT NOT NULL,               -- the input-request key, or the server's JSON-RPC request id
    mode          TEXT NOT NULL,               -- form | url
    message       TEXT NOT NULL,               -- the server's words
    schema_json   TEXT,                        -- form: the requested schema as sent
    url           TEXT,                        -- url mode: the page the server wants opened
    server_ref    TEXT,                        -- url mode: the server's elicitationId
    origin        TEXT NOT NULL,               -- the turn's origin (chat | job)
    status        TEXT NOT NULL,               -- pending | accepted | declined | cancelled | expired
    content_json  TEXT,                        -- an accepted form's answer until it is sent, then cleared
    reason        TEXT,                        -- why Palui declined or cancelled it without the person
    answered_via  TEXT,                        -- cli | web | api | a channel's name | palui
    owner         TEXT,                        -- in_call: the process holding the open call (host:pid)
    sent          INTEGER NOT NULL DEFAULT 0,  -- the reply went to the server
    created_at    REAL NOT NULL,
    expires_at    REAL NOT NULL,
    answered_at   REAL
);
CREATE INDEX elicitations_turn ON elicitations(turn_id, status);
CREATE INDEX elicitations_status ON elicitations(status);
""",
    )
)
MCP_MIGRATIONS.append(
    (
        21,
        "tools.task_support: MCP execution.taskSupport (a required tool is not offered)",
        """
ALTER TABLE tools ADD COLUMN task_support TEXT;  -- forbidden | optional | required | NULL (absent)
""",
    )
)
# A connector that needs a sign-in (stored state "error: sign in again") is not offered (spec §7.9); the
# offer reads the catalog snapshot (docs/decisions/0076-a-per-process-tool-catalog.md), so crossing into or
# out of that state bumps its version.
# Other state changes (connected, idle, errors of a start) do not: they change nothing offered.
MCP_MIGRATIONS.append(
    (
        22,
        "the catalog version follows a connector's need for a sign-in",
        """
CREATE TRIGGER catalog_connectors_signin AFTER UPDATE OF state ON connectors
WHEN (old.state IS 'error: sign in again') != (new.state IS 'error: sign in again')
BEGIN UPDATE catalog SET version = version + 1; END;
""",
    )
)

# Secret questions (spec §7.8): a server's form that asks for a password, a token, a card number… is refused
# unless the person allowed such questions for that connector. Read when a question arrives, never by the offer,
# so the catalog version does not follow it. The number is given here only (a merge may renumber it).
SECRET_QUESTIONS_MIGRATION = 36
MCP_MIGRATIONS.append(
    (
        SECRET_QUESTIONS_MIGRATION,
        "connectors.secret_questions: the person allows a server's questions that ask for a secret",
        """
ALTER TABLE connectors ADD COLUMN secret_questions INTEGER NOT NULL DEFAULT 0;  -- 1: asked with hidden input
""",
    )
)

# Scope step-up (spec §7.11): a tool the server refuses for a wider OAuth scope asks the person to sign in for
# the union of scopes; the request waits here until a sign-in grants it or the person declines it (then the
# tool is switched off with that reason). The number is given here only (a merge may renumber it).
SCOPE_REQUESTS_MIGRATION = 44
MCP_MIGRATIONS.append(
    (
        SCOPE_REQUESTS_MIGRATION,
        "scope_requests: a tool that needs a wider OAuth scope asks the person (sign in for the union, or decline)",
        """
CREATE TABLE scope_requests (
    id            TEXT PRIMARY KEY,            -- s-<hex>
    connector_id  TEXT NOT NULL,
    tool          TEXT NOT NULL,               -- the tool's raw name
    name          TEXT NOT NULL,               -- its model-visible name
    needed        TEXT NOT NULL,               -- the scopes it needs beyond the grant, space-separated
    granted       TEXT NOT NULL DEFAULT '',    -- the scopes held when it was refused, space-separated
    turn_id       TEXT,                        -- the turn whose call was refused
    status        TEXT NOT NULL DEFAULT 'pending',  -- pending | granted | declined
    reason        TEXT,                        -- a declined request's: why the tool is off
    created_at    REAL NOT NULL,
    answered_at   REAL,
    answered_via  TEXT                         -- cli, web, api, a channel's name; 'sign-in' when granted
);
CREATE INDEX scope_requests_connector ON scope_requests(connector_id, status);
""",
    )
)
