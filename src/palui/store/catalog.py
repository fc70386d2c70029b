"""The tool catalog as this process last read it, checked against the stored catalog version (issue 11).

Every write to ``tools``, and to a connector's id, kind, switch or trust, bumps
``catalog.version`` by trigger inside the writing transaction (migration 13), so no write can
forget it. A :class:`Snapshot` holds every stored tool parsed once (JSON columns, effective
class) as of one version; :func:`snapshot` returns the cached one while the stored version is
unchanged (a one-row read) and otherwise reloads every row in one read transaction together
with the version it belongs to. What is derived from a snapshot (the offer's candidates, the
ranking index, tool definitions) is kept in its :attr:`Snapshot.memo` and so lives exactly
as long as that version.

:func:`tool_now` is the check right before a call is sent (SPEC §3, §5): the version and the
tool's own row are read by one statement, so a switch-off made by another process is seen
before the call, never at the next turn; the cached, already parsed row is used when the
version it read is the cached one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from palui.store.db import Database
from palui.store.tools import _SELECT, ToolRow, _row

_KEY = "catalog"
_NOW = ("SELECT (SELECT version FROM catalog) AS catalog_version, t.*, c.trusted_source AS connector_trusted,"
        " c.enabled AS connector_enabled, c.private AS connector_private, c.state AS connector_state"
        " FROM tools t JOIN connectors c ON c.id = t.connector_id")


@dataclass
class Snapshot:
    """Every stored tool as of catalog ``version``.

    ``tools`` maps model-visible names to rows (present or not, any connector); ``by_raw`` maps
    ``(connector id, raw name)`` to the model-visible name; ``memo`` holds what callers derive
    from this version (never shared with another version).
    """

    version: int
    tools: dict[str, ToolRow]
    by_raw: dict[tuple[str, str], str]
    memo: dict[Any, Any] = field(default_factory=dict)

    def usable(self) -> list[ToolRow]:
        """Tools still listed whose connector is enabled, by connector id then raw name."""
        rows = self.memo.get("usable")
        if rows is None:
            rows = self.memo["usable"] = sorted((r for r in self.tools.values() if r.usable),
                                                key=lambda r: (r.connector, r.tool))
        return rows


def version(db: Database) -> int:
    """The stored catalog version (one row)."""
    return int(db.row("SELECT version FROM catalog")[0])


def snapshot(db: Database) -> Snapshot:
    """The catalog as stored now: the cached snapshot if its version is still the stored one, else
    every tool row read again (with the version, in one read transaction) and cached.

    A row whose stored columns are exactly those of the previous snapshot keeps its parsed
    :class:`ToolRow` (its JSON is not parsed again): after one tool changes, only that tool is.
    """
    cached: Snapshot | None = db.memo.get(_KEY)
    if cached is not None and cached.version == version(db):
        return cached
    before: dict[str, tuple] = cached.memo.get("raw", {}) if cached is not None else {}
    rows, raw = [], {}
    with db.read() as c:
        v = int(c.execute("SELECT version FROM catalog").fetchone()[0])
        for r in c.execute(_SELECT + " ORDER BY t.connector_id, t.raw_name"):
            values = tuple(r)
            name = r["name"]
            same = cached is not None and before.get(name) == values
            rows.append(cached.tools[name] if same and cached is not None else _row(r))
            raw[name] = values
    snap = Snapshot(v, {r.name: r for r in rows}, {(r.connector, r.tool): r.name for r in rows}, {"raw": raw})
    db.memo[_KEY] = snap
    return snap


def tool_now(db: Database, name: str | None = None, *, connector: str | None = None,
             raw_name: str | None = None) -> ToolRow | None:
    """One tool as stored at this moment, by model-visible ``name`` or by ``connector`` and
    ``raw_name``; None when there is no such tool. (Check :attr:`ToolRow.usable` too.)

    The version and the row come from one statement: when that version is the cached
    snapshot's, its parsed row is returned; otherwise the row just read is parsed (and the
    snapshot is left to reload at its next use).
    """
    if name is not None:
        r = db.one(_NOW + " WHERE t.name = ?", (name,))
    else:
        r = db.one(_NOW + " WHERE t.connector_id = ? AND t.raw_name = ?", (connector, raw_name))
    if r is None:
        return None
    cached: Snapshot | None = db.memo.get(_KEY)
    if cached is None:
        cached = snapshot(db)  # the first check in this process reads the catalog once
    if cached.version == r["catalog_version"]:
        hit = cached.tools.get(r["name"])
        if hit is not None:
            return hit
    return _row(r)
