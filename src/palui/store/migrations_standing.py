"""Migration 52: standing approvals, "deny and stop" (spec §5.9, §5.10).

- 52: ``standing_approvals``, the person's answers given in advance (one row per standing approval, ``r-…``):
  the tool it is bound to with the effective class and the definition hash it was made under, the context it
  answers in, its constraints per argument (JSON), its status and why, its expiry, and its uses. Every change to
  a row is also an audit row of the chain (``palui.store.standing``). ``approvals.rule_id`` names the standing
  approval that answered an ask (``answered_via`` ``rule``), or that was made from an approval answered "approve,
  and from now on the same" (``rule_made``); ``approvals.stop`` is a denial answered "deny and stop".

Appended to :data:`palui.store.migrations.MIGRATIONS`; never edited once shipped. Its number is written once, here,
so renumbering it on a merge is a one-line change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

STANDING = 52

STANDING_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = [
    (
        STANDING,
        "standing approvals, asks answered by them, denials that stop the tool use",
        """
CREATE TABLE standing_approvals (
    id              TEXT PRIMARY KEY,            -- r- and 128 random bits
    tool            TEXT NOT NULL,               -- model-visible name it is bound to
    connector       TEXT NOT NULL,
    tool_class      TEXT NOT NULL,               -- the effective class it was made under
    definition_hash TEXT NOT NULL,               -- the definition it was made under (spec §7.6)
    context         TEXT NOT NULL,               -- chat | tainted chat | job | gateway:NAME
    constraints     TEXT NOT NULL,               -- JSON per argument: pin, one_of, prefix or any (policy/standing.py)
    confirmed       INTEGER NOT NULL DEFAULT 0,  -- a destructive or unknown tool: the person confirmed it
    status          TEXT NOT NULL,               -- active | suspended | expired | removed
    status_reason   TEXT,
    made_from       TEXT,                        -- the approval it was made from
    made_via        TEXT NOT NULL,               -- cli | web | api | a channel's name
    created_at      REAL NOT NULL,
    expires_at      REAL NOT NULL,
    changed_at      REAL NOT NULL,
    uses            INTEGER NOT NULL DEFAULT 0,
    last_used_at    REAL
);
CREATE INDEX standing_approvals_tool ON standing_approvals(tool, status);
CREATE INDEX standing_approvals_status ON standing_approvals(status, expires_at);
ALTER TABLE approvals ADD COLUMN rule_id TEXT;                -- answered by this standing approval (via 'rule')
ALTER TABLE approvals ADD COLUMN rule_made TEXT;              -- a standing approval was made from this answer
ALTER TABLE approvals ADD COLUMN stop INTEGER NOT NULL DEFAULT 0;  -- denied with "deny and stop"
CREATE INDEX approvals_rule ON approvals(rule_id) WHERE rule_id IS NOT NULL;
""",
    ),
]
