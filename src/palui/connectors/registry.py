"""The stored tool registry: syncing a connector's listing into the ``tools`` table.

Applies spec §2 (prefill), §7 (naming, duplicates, new MCP tools off, rug-pull
protection). Every write goes through :meth:`Database.write`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from palui.connectors.base import ConnectorEnv, ToolSpec
from palui.connectors.naming import visible_name
from palui.policy.classify import prefill_class
from palui.store import tools as tools_store
from palui.store.db import Database
from palui.text.strict_json import finite
from palui.types import ClassSource, ToolClass

log = logging.getLogger(__name__)


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept (used for hashes and stored definitions). Strict:
    ``NaN`` and ``±Infinity`` raise ``ValueError`` (a listing's are made strings first, :func:`as_stored`)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def definition_hash(spec: ToolSpec) -> str:
    """SHA-256 over the tool's name, description, input schema and raw annotations (spec §7)."""
    payload = {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.input_schema,
        "annotations": spec.annotations,
    }
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def _content_hash(description: str, schema: Any) -> str:
    # finite: a schema an earlier Palui stored with NaN compares as the listing that is stored now
    return hashlib.sha256(canonical_json({"d": description, "s": finite(schema)}).encode()).hexdigest()


def as_stored(spec: ToolSpec) -> ToolSpec:
    """``spec`` as it is hashed and stored: a number JSON cannot carry (``NaN``, ``±Infinity``) in its schema or
    annotations made the string ``"NaN"``/``"Infinity"``/``"-Infinity"`` (stored JSON is strict, spec §10.1;
    the tool is flagged for it, :func:`palui.policy.input_schema.definition_problem`)."""
    schema, ann = finite(spec.input_schema), finite(spec.annotations)
    if schema is spec.input_schema and ann is spec.annotations:
        return spec
    return dataclasses.replace(spec, input_schema=schema, annotations=ann)


def schema_problem(spec: ToolSpec, max_chars: int | None) -> str | None:
    """Why an MCP tool's input schema is flagged (spec §7.6), from the listing as sent; None for a built-in
    (``max_chars`` None: Palui's own schemas) or a sound schema."""
    if max_chars is None:
        return None
    from palui.policy.input_schema import definition_problem  # jsonschema: only when a listing is synced

    return definition_problem(spec.input_schema, max_chars)


@dataclass
class SyncReport:
    """What a sync did: names of tools added, flagged as changed, tightened, removed;
    raw names refused as duplicates."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    tightened: list[str] = field(default_factory=list)
    loosening_held: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    refused_duplicates: list[str] = field(default_factory=list)
    #: (name, previous class, new class) of tools whose server's hints made the effective class stricter
    #: by themselves (spec §7.6: a tightening applies without review, and the person is told).
    class_tightened: list[tuple[str, str, str]] = field(default_factory=list)
    #: (name, why) of new tools whose input schema is flagged (spec §7.6): off until the person has seen it.
    schema_flagged: list[tuple[str, str]] = field(default_factory=list)

    @property
    def needs_telling(self) -> list[str]:
        """Messages for the person's channel (spec §7: the person is told)."""
        out = [f"Tool {n} changed its description or input schema: switched off, review it (palui tools review {n})."
               for n in self.changed]
        out += [
            f"Tool {n} tightened its class past your choice: the stricter class applies, review it."
            for n in self.tightened
        ]
        out += [
            f"Tool {n} asks for a looser class: it keeps its class until you review it." for n in self.loosening_held
        ]
        out += [f"Tool {n}'s server tightened its class from {old} to {new}: the stricter class applies now; "
                f"palui policy explain {n} says what that means for each turn."
                for n, old, new in self.class_tightened]
        out += [f"A server listed two tools named {r!r}: both refused." for r in self.refused_duplicates]
        out += [f"Tool {n} is flagged: {why}. It stays off until you have looked at it: palui tools show {n}."
                for n, why in self.schema_flagged]
        return out


def sync_tools(db: Database, connector_id: str, specs: list[ToolSpec], *, builtin: bool,
               max_schema_chars: int | None = None) -> SyncReport:
    """Store a connector's current listing.

    New tools get their class (built-in declaration, else the hints prefill) and
    start on (built-in) or off (MCP). Known tools whose description or input schema
    changed are switched off and flagged "changed — review"; annotation changes
    tighten the class by themselves, a loosening waits for review. Tools listed
    twice are refused, both of them. Tools no longer listed are marked absent.
    An MCP tool's input schema is checked (``max_schema_chars``: ``connectors.max_schema_chars``; None checks
    nothing) and what is wrong with it stored (``schema_problem``): the tool stays off until the person has
    seen it, as a tool with hidden characters does (spec §7.6, decision 0027).

    Linear in the listing: the names already taken are read once, not per new tool
    (docs/decisions/0080-sync-reads-taken-names-once.md).
    """
    report = SyncReport()
    counts: dict[str, int] = {}
    for s in specs:
        counts[s.name] = counts.get(s.name, 0) + 1
    dupes = {n for n, c in counts.items() if c > 1}
    for d in sorted(dupes):
        log.warning("connector %s listed tool %r more than once: refused", connector_id, d)
        report.refused_duplicates.append(d)
    now = time.time()
    with db.write() as c:
        existing = {r["raw_name"]: r for r in c.execute("SELECT * FROM tools WHERE connector_id = ?", (connector_id,))}
        taken: set[str] | None = None  # every stored name, read once (only when a tool is new) and kept up to date
        listed = set()
        for spec in specs:
            if spec.name in dupes:
                continue
            listed.add(spec.name)
            problem = None if builtin else schema_problem(spec, max_schema_chars)
            spec = as_stored(spec)
            new_hash = definition_hash(spec)
            hints = spec.declared_class if builtin else prefill_class(spec.annotations)
            source = ClassSource.BUILTIN.value if builtin else (ClassSource.HINTS.value if hints else None)
            row = existing.get(spec.name)
            ann_json = canonical_json(spec.annotations) if spec.annotations is not None else None
            if row is None:
                if taken is None:
                    taken = {r[0] for r in c.execute("SELECT name FROM tools")}
                name = visible_name(connector_id, spec.name, taken)
                taken.add(name)
                c.execute(
                    "INSERT INTO tools (connector_id, raw_name, name, description, input_schema, annotations,"
                    " definition_hash, base_class, base_source, enabled, untrusted_output, created_at, updated_at,"
                    " schema_problem) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        connector_id,
                        spec.name,
                        name,
                        spec.description,
                        canonical_json(spec.input_schema),
                        ann_json,
                        new_hash,
                        hints.value if hints else None,
                        source,
                        1 if builtin else 0,
                        1 if spec.untrusted_output else 0,
                        now,
                        now,
                        problem,
                    ),
                )
                report.added.append(name)
                if problem:
                    report.schema_flagged.append((name, problem))
                continue
            if not row["present"]:
                c.execute(
                    "UPDATE tools SET present = 1 WHERE connector_id = ? AND raw_name = ?", (connector_id, spec.name)
                )
            if row["definition_hash"] == new_hash and not _stale_review(row, new_hash):
                continue
            if builtin:
                # Built-in definitions come from our own code: take them as they are.
                c.execute(
                    "UPDATE tools SET description=?, input_schema=?, definition_hash=?, base_class=?, base_source=?,"
                    " untrusted_output=?, updated_at=? WHERE connector_id=? AND raw_name=?",
                    (
                        spec.description,
                        canonical_json(spec.input_schema),
                        new_hash,
                        hints.value if hints else None,
                        source,
                        1 if spec.untrusted_output else 0,
                        now,
                        connector_id,
                        spec.name,
                    ),
                )
                continue
            _apply_mcp_change(c, row, spec, new_hash, hints, ann_json, now, report, problem)
        for spec in specs:
            if spec.name not in dupes:  # not part of the definition (no review): execution.taskSupport
                c.execute("UPDATE tools SET task_support = ? WHERE connector_id = ? AND raw_name = ?"
                          " AND task_support IS NOT ?", (spec.task_support, connector_id, spec.name, spec.task_support))
        for raw, row in existing.items():
            if raw not in listed and row["present"]:
                c.execute("UPDATE tools SET present = 0 WHERE connector_id = ? AND raw_name = ?", (connector_id, raw))
                report.removed.append(row["name"])
    return report


def register_listing(
    env: ConnectorEnv, connector_id: str, specs: list[ToolSpec], *, name: str | None = None, kind: str = "mcp"
) -> SyncReport:
    """Store a connector's listing (creating the connector row if needed), spec §2 and §7, and tell
    the person what they must know (a tool flagged for review, a class tightened). Returns what changed.

    Used by MCP connectors on every connection and by the service for built-ins and tests.
    """
    tools_store.ensure_connector(env.db, connector_id, kind, name or connector_id)
    builtin = kind == "builtin"
    report = sync_tools(env.db, connector_id, specs, builtin=builtin,
                        max_schema_chars=None if builtin else env.settings.connectors.max_schema_chars)
    for text in report.needs_telling:
        env.notify("notice", text)
    if env.on_change is not None and (report.changed or report.tightened or report.removed
                                      or report.refused_duplicates or report.class_tightened):
        env.on_change()
    return report


def _pending_review(row) -> dict[str, Any]:
    """The review a flagged row holds ({} when not flagged or unreadable)."""
    if not row["changed"] or not row["review_json"]:
        return {}
    try:
        review = json.loads(row["review_json"])
    except ValueError:
        return {}
    return review if isinstance(review, dict) else {}


def _stored_json(raw: str | None) -> Any:
    """A stored JSON column, or None when it is NULL or does not parse (the row then reads flagged,
    :func:`palui.store.tools._row`; the listing's definition is held for review like any change)."""
    try:
        return json.loads(raw) if raw is not None else None
    except ValueError:
        return None


def _stale_review(row, new_hash: str) -> bool:
    """True when a held definition (changed/loosened) is no longer what the server lists.

    The stored definition equals the listing but a review still holds an older, different
    one: accepting it would apply a definition (e.g. a looser class) the server withdrew.
    """
    review = _pending_review(row)
    return review.get("kind") in ("changed", "loosened") and review.get("definition_hash") != new_hash


def _apply_mcp_change(
    c, row, spec: ToolSpec, new_hash: str, hints: ToolClass | None, ann_json: str | None, now: float,
    report: SyncReport, problem: str | None = None,
) -> None:
    """Apply the rug-pull rules to a known MCP tool whose listing differs from the stored
    (accepted) definition, or from the definition its pending review holds (spec §7).

    A pending review always ends up describing the current listing, so ``review``
    can never accept a definition the server no longer lists.
    """
    pending = _pending_review(row)
    kind = pending.get("kind")
    if kind in ("changed", "loosened") and pending.get("definition_hash") == new_hash:
        return  # already held for review, and the person was told
    old_schema = _stored_json(row["input_schema"])
    old_content = _content_hash(row["description"], old_schema)
    review: dict[str, Any] = {
        "description": spec.description,
        "input_schema": spec.input_schema,
        "annotations": spec.annotations,
        "definition_hash": new_hash,
        "schema_problem": problem,
        "previous": {
            "description": row["description"],
            "input_schema": finite(old_schema),
            "annotations": finite(_stored_json(row["annotations"])),
        },
    }
    key = (row["connector_id"], row["raw_name"])
    content_changed = _content_hash(spec.description, spec.input_schema) != old_content
    if content_changed or kind == "changed":
        # Rug pull: description or schema changed -> off and flagged, definition held for review.
        # A tool already switched off by an earlier change stays off even if the server goes back
        # to the accepted text: the person was told and decides (fail closed).
        review["kind"] = "changed"
        # The switch to give back after review: the real switch, unless an earlier change turned it off.
        review["was_enabled"] = bool(pending.get("was_enabled", False)) if kind == "changed" else bool(row["enabled"])
        c.execute(
            "UPDATE tools SET enabled = 0, changed = 1, review_json = ?, updated_at = ?"
            " WHERE connector_id = ? AND raw_name = ?",
            (canonical_json(review), now, *key),
        )
        if content_changed:
            report.changed.append(row["name"])
        return
    if kind == "loosened":
        # The held loosening is superseded by this listing; decide afresh below (it is held
        # again if this listing still loosens).
        c.execute("UPDATE tools SET changed = 0, review_json = NULL WHERE connector_id = ? AND raw_name = ?", key)
    # Only annotations changed.
    old_base = tools_store.stored_class(row["base_class"])  # a word that is not a class reads as unknown
    old_eff = old_base or ToolClass.DESTRUCTIVE
    new_eff = hints or ToolClass.DESTRUCTIVE
    user = tools_store.stored_class(row["user_class"])
    if new_eff.rank > old_eff.rank or (new_eff == old_eff and hints != old_base):
        # Tightening (or unknown <-> destructive at equal strictness) applies by itself.
        c.execute(
            "UPDATE tools SET annotations=?, definition_hash=?, base_class=?, base_source=?, updated_at=?"
            " WHERE connector_id=? AND raw_name=?",
            (ann_json, new_hash, hints.value if hints else None, "hints" if hints else None, now, *key),
        )
        if user is None and new_eff.rank > old_eff.rank:
            report.class_tightened.append((row["name"], old_eff.value, new_eff.value))
        if user is not None and new_eff.rank > user.rank:
            review["kind"] = "tightened"
            review["previous_user_class"] = user.value
            c.execute(
                "UPDATE tools SET user_class = NULL, changed = 1, review_json = ? WHERE connector_id=? AND raw_name=?",
                (canonical_json(review), *key),
            )
            report.tightened.append(row["name"])
        return
    if new_eff.rank < old_eff.rank:
        review["kind"] = "loosened"
        c.execute(
            "UPDATE tools SET changed = 1, review_json = ?, updated_at = ? WHERE connector_id=? AND raw_name=?",
            (canonical_json(review), now, *key),
        )
        report.loosening_held.append(row["name"])
        return
    # Same class, different raw annotations (e.g. a title): take them.
    c.execute(
        "UPDATE tools SET annotations=?, definition_hash=?, updated_at=? WHERE connector_id=? AND raw_name=?",
        (ann_json, new_hash, now, *key),
    )


def accept_review(c, row) -> None:
    """Accept a tool's pending definition (``palui tools review``): store it, clear the flag.

    A tool switched off by a description/schema change gets its previous switch back.
    """
    review = _pending_review(row)
    key = (row["connector_id"], row["raw_name"])
    now = time.time()
    if review.get("kind") in ("changed", "loosened"):
        ann = review.get("annotations")
        hints = prefill_class(ann)
        c.execute(
            "UPDATE tools SET description=?, input_schema=?, annotations=?, definition_hash=?, base_class=?,"
            " base_source=?, updated_at=?, schema_problem=? WHERE connector_id=? AND raw_name=?",
            (
                review["description"],
                canonical_json(review["input_schema"]),
                canonical_json(ann) if ann is not None else None,
                review["definition_hash"],
                hints.value if hints else None,
                "hints" if hints else None,
                now,
                review.get("schema_problem"),
                *key,
            ),
        )
        user = tools_store.stored_class(row["user_class"])
        if user is not None and (hints or ToolClass.DESTRUCTIVE).rank > user.rank:
            # The accepted definition's hints are stricter than the person's class: as with an
            # annotation-only tightening, the stricter class applies (spec §7); the person can
            # set the looser class again deliberately.
            c.execute("UPDATE tools SET user_class = NULL WHERE connector_id=? AND raw_name=?", key)
    enabled = 1 if review.get("kind") == "changed" and review.get("was_enabled") else row["enabled"]
    if review.get("kind") == "changed" and not review.get("was_enabled"):
        enabled = 0
    # The review showed the new definition escaped (its diff): that is seeing its hidden characters.
    c.execute(
        "UPDATE tools SET changed = 0, review_json = NULL, enabled = ?, hidden_ack = definition_hash"
        " WHERE connector_id=? AND raw_name=?",
        (enabled, *key),
    )
