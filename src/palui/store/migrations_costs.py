"""Migrations 11-14, 31, 35 and 45: every per-turn cost independent of history and catalog size (the decision
records 0072-0077 in docs/decisions/), reads bounded by what waits (35), and cached input kept apart (45).

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

COST_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = []

# Every per-turn cost independent of history. The caps read running counters kept by
# triggers in the transaction that writes the usage or run they count (so every writer keeps them
# true, tests and tools included): tokens per day (all turns: job_id '', and per job) and turn starts
# per minute (the sliding hour is the whole minutes inside it plus the exact rows of its first minute).
COST_MIGRATIONS.append(
    (
        11,
        "cap counters: tokens per day and job, turn starts per minute, kept by triggers",
        """
CREATE TABLE usage_days (
    day     TEXT NOT NULL,                     -- YYYY-MM-DD in the caps time zone, as usage.day
    job_id  TEXT NOT NULL DEFAULT '',          -- '' counts every turn; a job id counts that job's turns
    tokens  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, job_id)
) WITHOUT ROWID;
INSERT INTO usage_days (day, job_id, tokens) SELECT day, '', SUM(tokens) FROM usage GROUP BY day;
INSERT INTO usage_days (day, job_id, tokens)
    SELECT day, job_id, SUM(tokens) FROM usage WHERE job_id IS NOT NULL AND job_id != '' GROUP BY day, job_id;
CREATE TRIGGER usage_days_ai AFTER INSERT ON usage BEGIN
    INSERT OR IGNORE INTO usage_days (day, job_id) VALUES (new.day, '');
    UPDATE usage_days SET tokens = tokens + new.tokens WHERE day = new.day AND job_id = '';
    INSERT OR IGNORE INTO usage_days (day, job_id) SELECT new.day, new.job_id WHERE new.job_id != '';
    UPDATE usage_days SET tokens = tokens + new.tokens WHERE day = new.day AND job_id = new.job_id
        AND new.job_id != '';
END;
CREATE TRIGGER usage_days_ad AFTER DELETE ON usage BEGIN
    UPDATE usage_days SET tokens = tokens - old.tokens WHERE day = old.day AND job_id = '';
    UPDATE usage_days SET tokens = tokens - old.tokens WHERE day = old.day AND job_id = old.job_id
        AND old.job_id != '';
END;
CREATE TRIGGER usage_days_au AFTER UPDATE OF day, job_id, tokens ON usage BEGIN
    UPDATE usage_days SET tokens = tokens - old.tokens WHERE day = old.day AND job_id = '';
    UPDATE usage_days SET tokens = tokens - old.tokens WHERE day = old.day AND job_id = old.job_id
        AND old.job_id != '';
    INSERT OR IGNORE INTO usage_days (day, job_id) VALUES (new.day, '');
    UPDATE usage_days SET tokens = tokens + new.tokens WHERE day = new.day AND job_id = '';
    INSERT OR IGNORE INTO usage_days (day, job_id) SELECT new.day, new.job_id WHERE new.job_id != '';
    UPDATE usage_days SET tokens = tokens + new.tokens WHERE day = new.day AND job_id = new.job_id
        AND new.job_id != '';
END;
CREATE TABLE run_minutes (
    minute  INTEGER PRIMARY KEY,               -- CAST(runs.time / 60 AS INTEGER)
    runs    INTEGER NOT NULL DEFAULT 0
);
INSERT INTO run_minutes (minute, runs) SELECT CAST(time / 60 AS INTEGER), COUNT(*) FROM runs GROUP BY 1;
CREATE TRIGGER run_minutes_ai AFTER INSERT ON runs BEGIN
    INSERT OR IGNORE INTO run_minutes (minute) VALUES (CAST(new.time / 60 AS INTEGER));
    UPDATE run_minutes SET runs = runs + 1 WHERE minute = CAST(new.time / 60 AS INTEGER);
END;
CREATE TRIGGER run_minutes_ad AFTER DELETE ON runs BEGIN
    UPDATE run_minutes SET runs = runs - 1 WHERE minute = CAST(old.time / 60 AS INTEGER);
END;
CREATE TRIGGER run_minutes_au AFTER UPDATE OF time ON runs BEGIN
    UPDATE run_minutes SET runs = runs - 1 WHERE minute = CAST(old.time / 60 AS INTEGER);
    INSERT OR IGNORE INTO run_minutes (minute) VALUES (CAST(new.time / 60 AS INTEGER));
    UPDATE run_minutes SET runs = runs + 1 WHERE minute = CAST(new.time / 60 AS INTEGER);
END;
""",
    )
)
# An index for every query on the hot path (tests/test_sql_plans.py holds it), and the
# conversation list ordered by a stored last-activity time instead of computing it for every row.
COST_MIGRATIONS.append(
    (
        12,
        "hot-path indexes; conversations.last_at; indexes for retention",
        """
CREATE INDEX approvals_turn ON approvals(turn_id, status);
CREATE INDEX turns_conversation_status ON turns(conversation_id, status);
CREATE INDEX turns_job ON turns(job_id, status) WHERE job_id IS NOT NULL;
ALTER TABLE conversations ADD COLUMN last_at REAL;   -- the newest turn's start (or its own creation)
UPDATE conversations SET last_at = COALESCE(
    (SELECT MAX(t.created_at) FROM turns t WHERE t.conversation_id = conversations.id), created_at);
CREATE INDEX conversations_last ON conversations(last_at);
CREATE TRIGGER conversations_last_ai AFTER INSERT ON conversations WHEN new.last_at IS NULL BEGIN
    UPDATE conversations SET last_at = new.created_at WHERE id = new.id;
END;
CREATE TRIGGER conversations_last_turn AFTER INSERT ON turns BEGIN
    UPDATE conversations SET last_at = new.created_at
        WHERE id = new.conversation_id AND (last_at IS NULL OR last_at < new.created_at);
END;
CREATE INDEX inbox_time ON inbox(time);
CREATE INDEX untrusted_time ON untrusted_content(created_at);
CREATE INDEX webhook_deliveries_received ON webhook_deliveries(received_at);
""",
    )
)
# Tool rows are cached per process and checked against this version, which every write
# to tools (and to a connector's switch, trust or kind) bumps by trigger in its own transaction.
COST_MIGRATIONS.append(
    (
        13,
        "catalog version, bumped by every tool write",
        """
CREATE TABLE catalog (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    version  INTEGER NOT NULL
);
INSERT INTO catalog (id, version) VALUES (1, 1);
CREATE TRIGGER catalog_tools_ai AFTER INSERT ON tools BEGIN UPDATE catalog SET version = version + 1; END;
CREATE TRIGGER catalog_tools_au AFTER UPDATE ON tools BEGIN UPDATE catalog SET version = version + 1; END;
CREATE TRIGGER catalog_tools_ad AFTER DELETE ON tools BEGIN UPDATE catalog SET version = version + 1; END;
CREATE TRIGGER catalog_connectors_ai AFTER INSERT ON connectors BEGIN UPDATE catalog SET version = version + 1; END;
CREATE TRIGGER catalog_connectors_au AFTER UPDATE OF id, kind, enabled, trusted_source ON connectors BEGIN
    UPDATE catalog SET version = version + 1;
END;
CREATE TRIGGER catalog_connectors_ad AFTER DELETE ON connectors BEGIN UPDATE catalog SET version = version + 1; END;
""",
    )
)
# /status counts the last 7 days' asks on every call (store/report.py), and the
# report reads approvals by creation time: an index, so that read follows the window, not the history.
# Retention marks a conversation whose untrusted content it deleted, so the Rule of Two knows that it no
# longer sees every address that content named (store/retention.py, runner/rule_of_two.py).
COST_MIGRATIONS.append(
    (
        14,
        "approvals by creation time; conversations whose untrusted content retention pruned",
        """
CREATE INDEX approvals_created ON approvals(created_at);
ALTER TABLE conversations ADD COLUMN untrusted_pruned_at REAL;  -- when retention last deleted its untrusted content
""",
    )
)
# The first offer after one tool changed re-read every tool row (3 ms of its ~10 ms over 1,000
# tools). Every tool row now carries the catalog version of its last write (``rev``, set by the same
# triggers that bump the version), and the catalog the versions of the last tool deletion and the last
# connector change, so a process with a cached snapshot reads only the rows written since
# (store/catalog.py), and everything again after a deletion or a connector change. The triggers of
# migrations 13, 22 and 25 are replaced with the same conditions and one more assignment each. A
# trigger's own ``UPDATE tools SET rev`` changes ``rev``, so ``catalog_tools_au`` (``WHEN new.rev IS
# old.rev``) does not count it again.
COST_MIGRATIONS.append(
    (
        31,
        "each tool row carries the catalog version of its last write; the catalog, of its last deletion and "
        "connector change",
        """
ALTER TABLE tools ADD COLUMN rev INTEGER NOT NULL DEFAULT 0;          -- catalog version of the row's last write
ALTER TABLE catalog ADD COLUMN removed INTEGER NOT NULL DEFAULT 0;    -- version of the last tool deletion
ALTER TABLE catalog ADD COLUMN connectors INTEGER NOT NULL DEFAULT 0; -- version of the last connector change
CREATE INDEX tools_rev ON tools(rev);
UPDATE catalog SET version = version + 1, removed = version + 1, connectors = version + 1;
DROP TRIGGER catalog_tools_ai;
DROP TRIGGER catalog_tools_au;
DROP TRIGGER catalog_tools_ad;
DROP TRIGGER catalog_connectors_ai;
DROP TRIGGER catalog_connectors_au;
DROP TRIGGER catalog_connectors_ad;
DROP TRIGGER catalog_connectors_signin;
CREATE TRIGGER catalog_tools_ai AFTER INSERT ON tools BEGIN
    UPDATE catalog SET version = version + 1;
    UPDATE tools SET rev = (SELECT version FROM catalog) WHERE rowid = new.rowid;
END;
CREATE TRIGGER catalog_tools_au AFTER UPDATE ON tools WHEN new.rev IS old.rev BEGIN
    UPDATE catalog SET version = version + 1;
    UPDATE tools SET rev = (SELECT version FROM catalog) WHERE rowid = new.rowid;
END;
CREATE TRIGGER catalog_tools_ad AFTER DELETE ON tools BEGIN
    UPDATE catalog SET version = version + 1, removed = version + 1;
END;
CREATE TRIGGER catalog_connectors_ai AFTER INSERT ON connectors BEGIN
    UPDATE catalog SET version = version + 1, connectors = version + 1;
END;
CREATE TRIGGER catalog_connectors_au AFTER UPDATE OF id, kind, enabled, trusted_source, private ON connectors BEGIN
    UPDATE catalog SET version = version + 1, connectors = version + 1;
END;
CREATE TRIGGER catalog_connectors_ad AFTER DELETE ON connectors BEGIN
    UPDATE catalog SET version = version + 1, connectors = version + 1;
END;
CREATE TRIGGER catalog_connectors_signin AFTER UPDATE OF state ON connectors
WHEN (old.state IS 'error: sign in again') != (new.state IS 'error: sign in again')
BEGIN UPDATE catalog SET version = version + 1, connectors = version + 1; END;
""",
    )
)
# Reads bounded by what waits, not by history (docs/decisions/0154-reads-bounded.md): pending approvals and
# questions are read and counted as ``status = 'pending' AND expires_at > now`` and the next expiry is their
# minimum, each a search of (status, expires_at); an accepted form's answer waiting to be sent is found
# through a partial index of the few rows that hold one, not by listing every finished turn; the newest
# questions through their creation time; /status's 7 days of asks from an index that covers them.
READS_BOUNDED = 35
COST_MIGRATIONS.append(
    (
        READS_BOUNDED,
        "pending approvals and questions by expiry; questions holding an answer not yet sent",
        """
CREATE INDEX approvals_pending ON approvals(status, expires_at);
CREATE INDEX elicitations_pending ON elicitations(status, expires_at);
CREATE INDEX elicitations_created ON elicitations(created_at);
CREATE INDEX approvals_window ON approvals(created_at, status, answered_at);
CREATE INDEX elicitations_content ON elicitations(turn_id) WHERE content_json IS NOT NULL;
""",
    )
)

# Caps count what the provider bills (spec §6.4): each request's cache-read input tokens are kept apart, with the
# weight they were counted at; ``usage.tokens`` stays what the caps count (uncached input + output + cached input
# at its weight), so the day's counters and every reader of them are unchanged. Rows written before this
# migration have no split (cached 0, weight NULL): their full count stands (not re-weighted). The day's cached
# input is kept beside its count by triggers of their own, in the same transaction as the row.
CACHED_INPUT = 45
COST_MIGRATIONS.append(
    (
        CACHED_INPUT,
        "usage keeps cached input apart (tokens read from the provider's cache) and the weight it counted at",
        """
ALTER TABLE usage ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;  -- cache-read input tokens (raw)
ALTER TABLE usage ADD COLUMN cached_weight REAL;                        -- what one counted for; NULL: before 45
ALTER TABLE usage_days ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
CREATE TRIGGER usage_days_cached_ai AFTER INSERT ON usage WHEN new.cached_tokens != 0 BEGIN
    INSERT OR IGNORE INTO usage_days (day, job_id) VALUES (new.day, '');
    UPDATE usage_days SET cached_tokens = cached_tokens + new.cached_tokens WHERE day = new.day AND job_id = '';
    INSERT OR IGNORE INTO usage_days (day, job_id) SELECT new.day, new.job_id WHERE new.job_id != '';
    UPDATE usage_days SET cached_tokens = cached_tokens + new.cached_tokens
        WHERE day = new.day AND job_id = new.job_id AND new.job_id != '';
END;
CREATE TRIGGER usage_days_cached_ad AFTER DELETE ON usage WHEN old.cached_tokens != 0 BEGIN
    UPDATE usage_days SET cached_tokens = cached_tokens - old.cached_tokens WHERE day = old.day AND job_id = '';
    UPDATE usage_days SET cached_tokens = cached_tokens - old.cached_tokens
        WHERE day = old.day AND job_id = old.job_id AND old.job_id != '';
END;
CREATE TRIGGER usage_days_cached_au AFTER UPDATE OF day, job_id, cached_tokens ON usage BEGIN
    UPDATE usage_days SET cached_tokens = cached_tokens - old.cached_tokens WHERE day = old.day AND job_id = '';
    UPDATE usage_days SET cached_tokens = cached_tokens - old.cached_tokens
        WHERE day = old.day AND job_id = old.job_id AND old.job_id != '';
    INSERT OR IGNORE INTO usage_days (day, job_id) VALUES (new.day, '');
    UPDATE usage_days SET cached_tokens = cached_tokens + new.cached_tokens WHERE day = new.day AND job_id = '';
    INSERT OR IGNORE INTO usage_days (day, job_id) SELECT new.day, new.job_id WHERE new.job_id != '';
    UPDATE usage_days SET cached_tokens = cached_tokens + new.cached_tokens
        WHERE day = new.day AND job_id = new.job_id AND new.job_id != '';
END;
""",
    )
)
