"""Migrations 25-29: the hash-chained audit (spec §10.3), the Rule of Two's flags (spec §4.5), jobs limited
to some connectors (spec §8.4), and the catalog version bumped by a connector's private mark.

Appended to :data:`palui.store.migrations.MIGRATIONS`; like every migration, never edited once shipped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

GOVERNANCE_MIGRATIONS: list[tuple[int, str, str | Callable[[sqlite3.Connection], None]]] = []


def _chain_audit(c: sqlite3.Connection) -> None:
    """Rows written before the audit was hash-chained are chained once, in id order (spec §10.3)."""
    from palui.store.audit_chain import chain_existing

    chain_existing(c)


GOVERNANCE_MIGRATIONS.append(
    (
        25,
        "audit rows carry a hash over their content and the previous row's hash",
        """
ALTER TABLE audit ADD COLUMN prev_hash TEXT;  -- the previous row's hash (GENESIS for the first row)
ALTER TABLE audit ADD COLUMN hash TEXT;       -- SHA-256 over prev_hash and the row (store/audit_chain.py)
""",
    )
)
GOVERNANCE_MIGRATIONS.append(
    (26, "chain the audit rows written before the chain, and write the audit_head file", _chain_audit)
)

GOVERNANCE_MIGRATIONS.append(
    (
        27,
        "Rule of Two: a tool the person flags as reaching outside, a connector whose results are private",
        """
ALTER TABLE tools ADD COLUMN reaches_outside INTEGER NOT NULL DEFAULT 0;  -- the person's "reaches outside" flag
ALTER TABLE connectors ADD COLUMN private INTEGER NOT NULL DEFAULT 0;     -- its results are the person's private data
""",
    )
)

GOVERNANCE_MIGRATIONS.append(
    (
        28,
        "a job limited to some connectors",
        """
ALTER TABLE jobs ADD COLUMN connectors TEXT;  -- JSON list of connector ids its turns are offered; NULL: all
""",
    )
)

# The Rule of Two (spec §4.5) reads a connector's private mark from the cached catalog
# (store/catalog.py), so marking a connector private bumps the catalog version like its switch does.
GOVERNANCE_MIGRATIONS.append(
    (
        29,
        "the catalog version is bumped by a connector's private mark too",
        """
DROP TRIGGER catalog_connectors_au;
CREATE TRIGGER catalog_connectors_au AFTER UPDATE OF id, kind, enabled, trusted_source, private ON connectors BEGIN
    UPDATE catalog SET version = version + 1;
END;
""",
    )
)
