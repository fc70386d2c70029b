"""Service part: connectors, tools, classes, switches, review, the Rule of Two's flags, policy explain
(spec §2, §3, §4.5, §7).

The lowest part of the catalog: the connectors part (:mod:`palui.service.connectors`), the policy pin,
the suggestions, the status and the report each hold a reference to it. Its connector rows are the stored
ones; the connectors as the person sees them (with each MCP server's configuration and live state) are the
connectors part's.

What the Rule of Two looks at that the person sets is here too (spec §4.5): a tool flagged "reaches
outside" (``palui tools reaches-outside NAME…``: besides ``web__fetch_page`` and MCP tools with
``openWorldHint: true``, the tools whose calls can carry data out), and a connector marked private
(``palui connectors private ID``: its results count as the person's private data, like memories and tasks).
"""

from __future__ import annotations

import builtins
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from palui.config import Settings
from palui.connectors.base import ToolSpec
from palui.connectors.builtin import BUILTIN_TOOLS
from palui.connectors.hub import ConnectorHub
from palui.connectors.registry import SyncReport, accept_review, register_listing, sync_tools
from palui.errors import NotFound, UsageError
from palui.policy.classify import parse_class
from palui.policy.matrix import decide
from palui.policy.standing import context_of, describe
from palui.store import tools as tools_store
from palui.store.db import Database
from palui.store.tools import ToolRow as ToolRow  # named by front ends (web/connectors.py)
from palui.text.display import named
from palui.text.review import review_changes, review_fingerprint
from palui.types import SIGN_IN_AGAIN, Origin, ToolClass, Verdict

if TYPE_CHECKING:
    from palui.results import Connector, Explanation, ToolDetails

BUILTIN_NAMES = {"recall": "Memories", "tasks": "Tasks", "web": "Web pages", "messages": "Messages"}


def shown_state(stored: str, live: str | None) -> str:
    """An MCP connector's state as the person sees it (spec §7): ``disabled``; else its live state in this
    process; else ``error: sign in again`` when it waits for a sign-in (stored by any process, spec §7.7); else
    ``idle`` (it starts when a turn calls one of its tools). ``stored`` is ``disabled`` or its row's ``state``
    (as :meth:`ToolsPart.connector_rows` gives it); ``live`` its state live in this process, or None."""
    if stored == "disabled":
        return "disabled"
    return live or (SIGN_IN_AGAIN if stored == SIGN_IN_AGAIN else "idle")


class ToolsPart:
    """Connectors and tools as the person sees and steers them.

    Args:
        db: the database (connectors, tools).
        settings: ``budgets.tools``.
        hub: the connector hub (its environment stores a listing).
        redecide: re-decides pending approvals after a change that may refuse them (spec §5):
            :meth:`palui.service.collaborators.Redecision.redecide_approvals`.
    """

    def __init__(self, db: Database, settings: Settings, hub: ConnectorHub, redecide: Callable[[], object]) -> None:
        self.db = db
        self.settings = settings
        self.hub = hub
        self.redecide = redecide

    # -- connectors and tools ---------------------------------------------------------------

    def register_builtins(self) -> None:
        """A start-up step: the built-in connectors and their tools stored as this version defines them."""
        for cid, specs in BUILTIN_TOOLS.items():
            tools_store.ensure_connector(self.db, cid, "builtin", BUILTIN_NAMES[cid])
            sync_tools(self.db, cid, specs, builtin=True)

    def connector_rows(self) -> list[Connector]:
        """The stored connectors: ``[{"id","kind","name","transport","state","trusted_source","private","tools",
        "enabled_tools"}]`` (``private``: its results are the person's private data, spec §4.5).
        :meth:`palui.service.connectors.ConnectorsPart.list` adds what an MCP server has more."""
        out: list[Connector] = []
        for r in tools_store.list_connectors(self.db):
            out.append({
                "id": r["id"], "kind": r["kind"], "name": r["name"], "transport": r["transport"],
                "state": r["state"] if r["enabled"] else "disabled",
                "trusted_source": bool(r["trusted_source"]), "private": bool(r["private"]), "tools": r["tools"],
                "enabled_tools": r["enabled_tools"],
            })
        return out

    def require_connector(self, cid: str) -> None:
        """Raises NotFound unless ``cid`` is a stored connector."""
        if not self.db.one("SELECT 1 FROM connectors WHERE id = ?", (cid,)):
            raise NotFound(f"unknown connector {named(cid)} (see: palui connectors list)")

    def list(self, connector: str | None = None) -> list[ToolRow]:
        """Stored tools still listed by their connector, with effective classes."""
        if connector is not None:  # an empty name is an unknown connector, never "every connector"
            self.require_connector(connector)
        return tools_store.list_tools(self.db, connector, present_only=True)

    def get(self, name: str) -> ToolRow:
        """One tool by its model-visible name. Raises NotFound."""
        row = tools_store.get_tool(self.db, name)
        if row is None:
            raise NotFound(f"unknown tool {named(name)} (see: palui tools list)")
        return row

    def find(self, name: str) -> ToolRow | None:
        """The stored tool named ``name``, or None (a stopped call's audit row names its class when it still
        exists)."""
        return tools_store.get_tool(self.db, name)

    def register(self, connector_id: str, specs: builtins.list[ToolSpec], *, name: str | None = None,
                 kind: str = "mcp") -> SyncReport:
        """Store a connector's listing (creating the connector row if needed), spec §2 and §7.

        Used by MCP connectors on every connection, and by tests to add tools with
        raw annotations. Returns what changed.
        """
        return register_listing(self.hub.env, connector_id, specs, name=name, kind=kind)

    def set_class(self, name: str, word: str) -> ToolRow:
        """Set the person's class for a tool (spec §2). Raises NotFound, UsageError."""
        row = self.get(name)
        try:
            cls = parse_class(word)
        except ValueError as e:
            raise UsageError(str(e)) from None
        with self.db.write() as c:
            c.execute("UPDATE tools SET user_class = ? WHERE connector_id = ? AND raw_name = ?",
                      (cls.value, row.connector, row.tool))
        self.redecide()
        return self.get(name)

    def reset_class(self, name: str) -> ToolRow:
        """Drop the person's class choice; the builtin/hints/unknown class applies again."""
        row = self.get(name)
        with self.db.write() as c:
            c.execute("UPDATE tools SET user_class = NULL WHERE connector_id = ? AND raw_name = ?",
                      (row.connector, row.tool))
        self.redecide()
        return self.get(name)

    def set_enabled(self, names: builtins.list[str], enabled: bool) -> builtins.list[ToolRow]:
        """Switch tools on or off. All names are checked first: one unknown name changes nothing.

        A tool flagged "changed — review" cannot be switched on before review (UsageError).
        """
        rows = [self.get(n) for n in names]
        if enabled:
            flagged = [r.name for r in rows if r.changed]
            if flagged:
                raise UsageError(
                    f"{', '.join(flagged)}: changed since you last saw it; review it first (palui tools review NAME)"
                )
            unseen = [r for r in rows if r.must_be_seen and not r.hidden_seen]
            if unseen:
                what = ("has hidden characters" if unseen[0].hidden else "has a name with look-alike characters"
                        if unseen[0].look_alike else f"is flagged: {unseen[0].schema_problem}")
                raise UsageError(
                    f"{', '.join(r.name for r in unseen)}: its definition {what}; look at it first with "
                    f"palui tools show {unseen[0].name} (it shows them escaped), then switch it on"
                )
        with self.db.write() as c:
            for r in rows:
                c.execute("UPDATE tools SET enabled = ? WHERE connector_id = ? AND raw_name = ?",
                          (1 if enabled else 0, r.connector, r.tool))
        if not enabled:
            self.redecide()
        return [self.get(r.name) for r in rows]

    def enable_read(self, connector: str | None = None) -> builtins.list[ToolRow]:
        """Switch on every tool whose effective class is read, never one flagged changed, with hidden
        characters, a look-alike name or a flagged input schema (spec §7.4)."""
        targets = [r for r in self.list(connector)
                   if r.tool_class is ToolClass.READ and not r.changed and not r.enabled and not r.must_be_seen]
        with self.db.write() as c:
            for r in targets:
                c.execute("UPDATE tools SET enabled = 1 WHERE connector_id = ? AND raw_name = ?",
                          (r.connector, r.tool))
        return [self.get(r.name) for r in targets]

    def _tools_on(self) -> int:
        """How many tools are switched on (listed, of an enabled connector): the candidates of every
        chat turn's offer before the policy and ``budgets.tools`` (spec §6)."""
        rows = tools_store.list_tools(self.db, present_only=True)
        on_connectors = {r["id"] for r in self.db.all("SELECT id FROM connectors WHERE enabled = 1")}
        return sum(1 for r in rows if r.enabled and r.connector in on_connectors)

    def budget_warning(self) -> str | None:
        """A warning when more tools are on than ``budgets.tools`` (spec §6.2): each turn then offers only
        the most relevant ones, and a call to one left out is refused. None when all fit."""
        on, budget = self._tools_on(), self.settings.budgets.tools
        if on <= budget:
            return None
        return (f"{on} tools are on, more than budgets.tools ({budget}): each turn offers the {budget} most "
                f"relevant and leaves the others out; raise budgets.tools in palui.toml or switch tools off "
                f"(palui tools disable NAME)")

    def details(self, name: str) -> ToolDetails:
        """``palui tools show``: a tool's stored definition and, when flagged, the change that waits.

        Returns the :meth:`ToolRow.as_dict` fields plus ``"input_schema"``, ``"definition_hash"``
        and ``"pending"``: None, or ``{"kind": "changed"|"loosened"|"tightened", "fingerprint",
        "was_enabled", "previous_user_class", "description", "input_schema", "annotations",
        "previous": {"description","input_schema","annotations"}, "changes": [{"field","title",
        "previous","new","diff"}]}`` with unified diffs (:func:`palui.text.review.review_changes`).
        Pass ``fingerprint`` to :meth:`review` to accept exactly this change. Raises NotFound.
        """
        row = self.get(name)
        from palui.policy.input_schema import schema_chars

        out: ToolDetails = {**row.as_dict(), "input_schema": row.input_schema,
                            "schema_chars": schema_chars(row.input_schema),
                            "definition_hash": row.definition_hash, "pending": None}
        if row.changed:
            raw = self.db.one("SELECT review_json FROM tools WHERE connector_id = ? AND raw_name = ?",
                              (row.connector, row.tool))
            review = row.review or {}
            out["pending"] = {
                "kind": review.get("kind", "changed"),
                "fingerprint": review_fingerprint(raw["review_json"] if raw else None),
                "was_enabled": review.get("was_enabled"),
                "previous_user_class": review.get("previous_user_class"),
                "description": review.get("description"),
                "input_schema": review.get("input_schema"),
                "annotations": review.get("annotations"),
                "previous": review.get("previous") or {},
                "changes": review_changes(review),
            }
        return out

    def acknowledge_hidden(self, name: str, definition_hash: str) -> ToolRow:
        """The person saw ``name``'s definition with its hidden characters escaped, or its flagged input schema
        (``palui tools show``, the connector sheet): it may be switched on while the definition stays the one shown
        (``definition_hash``, from :meth:`details`). Raises NotFound, UsageError (changed since)."""
        row = self.get(name)
        if row.definition_hash != definition_hash:
            raise UsageError(f"{name} changed since it was shown; look at it again (palui tools show {name})")
        with self.db.write() as c:
            c.execute("UPDATE tools SET hidden_ack = ? WHERE connector_id = ? AND raw_name = ?",
                      (definition_hash, row.connector, row.tool))
        return self.get(name)

    def review(self, name: str, expected: str | None = None) -> ToolRow:
        """Accept a changed tool's pending definition (``palui tools review``, spec §7).

        ``expected`` is the ``pending["fingerprint"]`` of :meth:`details` the person
        looked at: when given, a pending change that was replaced in between (the server
        changed again) is refused instead of accepted unseen. Raises NotFound, UsageError
        (not flagged, or the pending change is no longer the one shown).
        """
        row = self.get(name)
        with self.db.write() as c:
            r = c.execute("SELECT * FROM tools WHERE connector_id = ? AND raw_name = ?",
                          (row.connector, row.tool)).fetchone()
            if r is None or not r["changed"]:
                raise UsageError(f"{name} is not flagged for review")
            if expected is not None and review_fingerprint(r["review_json"]) != expected:
                raise UsageError(f"the pending change of {name} was replaced while you looked at it; "
                                 f"nothing accepted: review it again (palui tools review {name})")
            accept_review(c, r)
        self.redecide()
        return self.get(name)

    def set_trusted(self, connector: str, tool: str | None = None, trusted: bool = True) -> None:
        """Mark a connector (or one of its tools) a trusted source: its output no longer taints (spec §4)."""
        self.require_connector(connector)
        with self.db.write() as c:
            if tool is None:
                c.execute("UPDATE connectors SET trusted_source = ? WHERE id = ?", (int(trusted), connector))
            else:
                row = self.get(tool)
                if row.connector != connector:
                    raise NotFound(f"tool {tool!r} is not a tool of {connector}")
                c.execute("UPDATE tools SET trusted_source = ? WHERE connector_id = ? AND raw_name = ?",
                          (int(trusted), connector, row.tool))

    # -- the Rule of Two's flags (spec §4.5) --------------------------------------------------------

    def set_reaches_outside(self, names: builtins.list[str], on: bool = True) -> builtins.list[ToolRow]:
        """Flag tools as reaching outside (or drop the flag), for the Rule of Two. All names are checked first.
        Raises NotFound."""
        rows = [self.get(n) for n in names]
        with self.db.write() as c:
            for r in rows:
                c.execute("UPDATE tools SET reaches_outside = ? WHERE connector_id = ? AND raw_name = ?",
                          (int(on), r.connector, r.tool))
        return [self.get(r.name) for r in rows]

    def set_private(self, connector: str, on: bool = True) -> None:
        """Mark a connector's results private (or not), for the Rule of Two. Raises NotFound."""
        self.require_connector(connector)
        with self.db.write() as c:
            c.execute("UPDATE connectors SET private = ? WHERE id = ?", (int(on), connector))

    # -- policy ---------------------------------------------------------------------------------

    def explain(self, name: str, origin: Origin = Origin.CHAT, tainted: bool = False,
                taint_source: str | None = None) -> Explanation:
        """``palui policy explain``: ``{"tool","class","class_source","origin","tainted","verdict","reason",
        "standing"}``; ``standing``: for an ``ask``, each active standing approval of the situation's context that may
        answer it (spec §5.9: the verdict stays ``ask``)."""
        row = self.get(name)
        d = decide(row.tool_class, row.enabled, origin, tainted, taint_source)
        verdict, reason, source = d.verdict.value, d.reason, d.source
        if d.offered and not row.connector_enabled:  # the connector's switch is above the tool's
            verdict, reason, source = (Verdict.OFF.value, f"its connector {row.connector} is disabled "
                                       f"(palui connectors enable {row.connector})", "switch")
        elif d.offered and not row.present:
            verdict, reason, source = (Verdict.UNAVAILABLE.value, "its server no longer lists it", "switch")
        answered = []
        if verdict == Verdict.ASK.value:
            rows = self.db.all("SELECT id, constraints FROM standing_approvals WHERE tool = ? AND status = 'active'"
                               " AND context = ? AND expires_at > ? ORDER BY created_at",
                               (row.name, context_of(origin.value, tainted), time.time()))
            answered = [f"answered in advance by rule {r['id']} for calls with {describe(json.loads(r['constraints']))}"
                        for r in rows]
        return {
            "tool": row.name, "class": row.tool_class.value, "class_source": row.class_source.value,
            "origin": origin.value, "tainted": tainted, "verdict": verdict, "reason": reason, "source": source,
            "standing": answered,
        }

