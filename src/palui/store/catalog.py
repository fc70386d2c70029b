"""The tool catalog as this process last read it, checked against the stored catalog version
(docs/decisions/0076-a-per-process-tool-catalog.md).

Every write to ``tools``, and to a connector's id, kind, switch, trust, private mark or sign-in
state, bumps ``catalog.version`` by trigger inside the writing transaction (migrations 13, 22,
25, 31), so no write can forget it. A :class:`Snapshot` holds every stored tool parsed once (JSON columns, effective
class) as of one version; :func:`snapshot` returns the cached one while the stored version is
unchanged (a one-row read) and otherwise reads, in one read transaction together with the version
they belong to, the rows written since (each row carries the version of its last write, migration
31), or every row after a tool deletion or a connector change (connector columns are joined into
every row). What is derived from a snapshot (the offer's candidates, the
ranking index, tool definitions) is kept in its :attr:`Snapshot.memo` and so lives exactly
as long as that version.

:func:`tool_now` is the check right before a call is sent (spec §3, §5): the version and the
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
    read again (with the version, in one read transaction) and cached.

    With a cached snapshot and neither a tool deleted nor a connector changed since its version,
    only the tool rows written since (``rev`` above its version, migration 31) are read and parsed
    (:func:`_patched`); otherwise every row is read, and a row whose stored columns are exactly
    those of the previous snapshot keeps its parsed :class:`ToolRow` (its JSON is not parsed again).
    """
    cached: Snapshot | None = db.memo.get(_KEY)
    if cached is not None and cached.version == version(db):
        return cached
    with db.read() as c:
        v, removed, connectors = c.execute("SELECT version, removed, connectors FROM catalog").fetchone()
        if cached is not None and max(removed, connectors) <= cached.version:
            written = c.execute(_SELECT + " WHERE t.rev > ?", (cached.version,)).fetchall()
            if len(written) <= max(64, len(cached.tools) // 4):
                snap = _patched(cached, int(v), written)
                db.memo[_KEY] = snap
                return snap
        before: dict[str, tuple] = cached.memo.get("raw", {}) if cached is not None else {}
        rows, raw = [], {}
        for r in c.execute(_SELECT + " ORDER BY t.connector_id, t.raw_name"):
            values = tuple(r)
            name = r["name"]
            same = cached is not None and before.get(name) == values
            rows.append(cached.tools[name] if same and cached is not None else _row(r))
            raw[name] = values
    snap = Snapshot(int(v), {r.name: r for r in rows}, {(r.connector, r.tool): r.name for r in rows}, {"raw": raw})
    db.memo[_KEY] = snap
    return snap


def _patched(cached: Snapshot, v: int, written: list[Any]) -> Snapshot:
    """A new snapshot at version ``v``: ``cached`` with the rows ``written`` since its version put in
    (no tool was deleted and no connector changed in between). A written row replaces the row of
    the same connector and raw name, whatever its model-visible name was; the old name goes first,
    so that two rows trading names end up right."""
    tools, by_raw, raw = dict(cached.tools), dict(cached.by_raw), dict(cached.memo.get("raw", {}))
    parsed = [(_row(r), tuple(r)) for r in written]
    for row, _ in parsed:
        old = by_raw.pop((row.connector, row.tool), None)
        if old is not None:
            tools.pop(old, None)
            raw.pop(old, None)
    for row, values in parsed:
        tools[row.name] = row
        by_raw[(row.connector, row.tool)] = row.name
        raw[row.name] = values
    return Snapshot(v, tools, by_raw, {"raw": raw})


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
