"""Migrations 42-43: one governed call for every door (spec §3.3, §7.6, §8.6, §10.1).

- 42: what a gateway session cannot reset. A client's calls share one conversation (its taint, untrusted
  content, approvals) until the person clears it; ``gateway_calls`` keeps what the loop rules count of them
  (a hash of each call, never its arguments), and ``loop_stop`` the rule that ended the client's tool use.
- 43: strict JSON at rest and flagged input schemas. ``tools.schema_problem`` holds why a tool's input schema is
  flagged; the tools already stored are checked (with ``connectors.max_schema_chars``'s default, 16,000: a
  migration reads no settings), a number JSON cannot carry in a stored schema is made a string, and a flagged
  tool that is on is switched off and the person told once, as migration 10 did for hidden characters. Rows an
  earlier Palui wrote with ``NaN`` or ``Infinity`` in unchained JSON (``turn_events``, ``turns.pending_json``,
  ``tools.review_json``) are re-encoded with those numbers as strings (SQLite's JSON functions refuse them);
  hashed rows are never rewritten (the audit, an approval's arguments: their readers show such numbers as
  strings, :func:`palui.text.strict_json.finite`).

Appended to :data:`palui.store.migrations.MIGRATIONS`; never edited once shipped. Their numbers are written once,
here, so renumbering them on a merge is a one-line change each.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

CLIENTS = 42
STRICT = 43
#: ``connectors.max_schema_chars``'s default, for the tools stored before the check existed.
DEFAULT_MAX_SCHEMA_CHARS = 16_000


def _strict_at_rest(c: sqlite3.Connection) -> None:
    from palui.policy.input_schema import definition_problem
    from palui.text.strict_json import finite, non_finite

    c.execute("ALTER TABLE tools ADD COLUMN schema_problem TEXT")  # why its input schema is flagged (spec §7.6)

    def strict(raw: str | None) -> str | None:
        """``raw`` re-encoded without non-finite numbers, or None when it needs nothing."""
        if not raw or ("NaN" not in raw and "Infinity" not in raw):
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            return None
        return json.dumps(finite(value), allow_nan=False) if non_finite(value) else None

    for rowid, event in c.execute("SELECT rowid, event FROM turn_events WHERE event LIKE '%NaN%' OR event LIKE"
                                  " '%Infinity%'").fetchall():
        if (fixed := strict(event)) is not None:
            c.execute("UPDATE turn_events SET event = ? WHERE rowid = ?", (fixed, rowid))
    for tid, pending in c.execute("SELECT id, pending_json FROM turns WHERE pending_json LIKE '%NaN%' OR"
                                  " pending_json LIKE '%Infinity%'").fetchall():
        if (fixed := strict(pending)) is not None:
            c.execute("UPDATE turns SET pending_json = ? WHERE id = ?", (fixed, tid))
    flagged = []
    rows = c.execute("SELECT t.connector_id, t.raw_name, t.name, t.input_schema, t.review_json, t.enabled FROM tools t"
                     " JOIN connectors k ON k.id = t.connector_id WHERE k.kind = 'mcp'").fetchall()
    for cid, raw_name, name, schema_json, review_json, enabled in rows:
        if (review := strict(review_json)) is not None:
            c.execute("UPDATE tools SET review_json = ? WHERE connector_id = ? AND raw_name = ?",
                      (review, cid, raw_name))
        try:
            schema = json.loads(schema_json or "{}")
        except ValueError:
            continue
        problem = definition_problem(schema, DEFAULT_MAX_SCHEMA_CHARS)
        if problem is None:
            continue
        c.execute("UPDATE tools SET schema_problem = ?, input_schema = ?, enabled = 0 WHERE connector_id = ? AND"
                  " raw_name = ?", (problem, json.dumps(finite(schema), sort_keys=True, separators=(",", ":"),
                                                       ensure_ascii=False, allow_nan=False), cid, raw_name))
        if enabled:
            flagged.append(name)
    if flagged:
        c.execute("INSERT INTO inbox (time, kind, text) VALUES (?, 'notice', ?)",
                  (time.time(), f"Switched off {len(flagged)} tool(s) whose input schema is flagged (a number JSON "
                   f"cannot carry, not a valid schema, a $ref outside it, or too long): {', '.join(flagged)}. Look "
                   "at each with palui tools show NAME before switching it on again."))


GOVERNED_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        CLIENTS,
        "a gateway client's conversation, loop counts and loop stop, kept across its sessions until cleared",
        """
ALTER TABLE gateway_clients ADD COLUMN conversation_id TEXT;  -- its sessions' conversation; a clear starts a new one
ALTER TABLE gateway_clients ADD COLUMN loop_stop TEXT;        -- the loop rule that ended its tool use, until cleared
CREATE TABLE gateway_calls (
    id              INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,   -- the client's conversation when the call was made
    tool_call_id    TEXT NOT NULL,
    tool            TEXT NOT NULL,
    call_key        TEXT NOT NULL,   -- the tool and the SHA-256 of its canonical arguments (never the arguments)
    outcome         TEXT NOT NULL,   -- success | failed | denied
    retry           INTEGER NOT NULL DEFAULT 0,  -- waited on or consumed its approval: not a repeat
    time            REAL NOT NULL
);
CREATE INDEX gateway_calls_key ON gateway_calls(conversation_id, call_key);
CREATE INDEX gateway_calls_order ON gateway_calls(conversation_id, id);
""",
    ),
    (STRICT, "tools' flagged input schemas; NaN and Infinity in unchained JSON made strings", _strict_at_rest),
]
