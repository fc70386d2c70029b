"""Reading and changing stored tools and connectors (the ``tools`` / ``connectors`` tables)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from palui.policy.classify import effective_class
from palui.policy.rule_of_two import reaches_outside
from palui.store.db import Database
from palui.text.display import hidden_in
from palui.text.escape import escape
from palui.types import SIGN_IN_AGAIN, ClassSource, ToolClass

if TYPE_CHECKING:
    from palui.results import Tool


@dataclass(frozen=True)
class ToolRow:
    """A stored tool with its effective class (spec §2)."""

    name: str
    connector: str
    tool: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None
    definition_hash: str
    tool_class: ToolClass
    class_source: ClassSource
    user_class: ToolClass | None
    enabled: bool
    untrusted_output: bool
    trusted_source: bool
    changed: bool
    review: dict[str, Any] | None
    present: bool
    connector_trusted: bool
    hidden_ack: str | None = None
    base_class: ToolClass | None = None  # the builtin declaration or hints prefill, before the person's choice
    connector_enabled: bool = True
    task_support: str | None = None
    connector_signin: bool = False  # its connector waits for the person to sign in again (spec §7.9)
    outside_flag: bool = False  # the person flagged it "reaches outside" (spec §4.5)
    connector_private: bool = False  # its connector's results are the person's private data (spec §4.5)
    schema_problem: str | None = None  # why its input schema is flagged (spec §7.6), None when it is not
    #: What of the stored row did not read through its schema (a class word that is not one, JSON that does
    #: not parse), as a sentence naming the column; None when all of it read (spec §2: read as unknown).
    unreadable: str | None = None

    @property
    def usable(self) -> bool:
        """Still listed by its server and its connector is enabled: the tool can be offered and called."""
        return self.present and self.connector_enabled

    @property
    def reaches_outside(self) -> bool:
        """``web__fetch_page``, ``openWorldHint: true`` or the person's flag (spec §4.5; see
        :func:`palui.policy.rule_of_two.reaches_outside`)."""
        return reaches_outside(self.name, self.annotations, self.outside_flag)

    @property
    def needs_tasks(self) -> bool:
        """Its server says it runs only as an MCP task (``execution.taskSupport: "required"``,
        MCP 2025-11-25 "Tasks"): Palui does not do tasks, so it is never offered and never called."""
        return self.task_support == "required"

    @property
    def hidden(self) -> bool:
        """Its name, description, schema or annotations hold hidden characters (spec §4.7): it is
        flagged, left out of ``enable-read``, and switched on only after the person saw it escaped."""
        return hidden_in([self.tool, self.description, self.input_schema, self.annotations])

    @property
    def look_alike(self) -> bool:
        """Its raw name has characters that look like others (a Cyrillic ``а`` in ``reаd_file``; UTS #39
        skeleton, spec §7.5): flagged like hidden characters."""
        from palui.text.confusables import has_look_alikes

        return has_look_alikes(self.tool)

    @property
    def must_be_seen(self) -> bool:
        """Hidden characters, a look-alike name or a flagged input schema: left off by ``enable-read``, switched
        on only after the person saw the definition (``hidden_seen``; spec §4.7, §7.5, §7.6)."""
        return self.hidden or self.look_alike or self.schema_problem is not None

    @property
    def schema_checked(self) -> bool:
        """Whether a call's arguments are validated against its input schema: not when the schema is flagged
        as unusable (not valid, a ``$ref`` outside it, a non-finite number) and the person switched it on
        anyway; a schema flagged only for its size is used (spec §3.3)."""
        from palui.policy.input_schema import schema_usable

        return schema_usable(self.schema_problem)

    @property
    def hidden_seen(self) -> bool:
        """The person looked at this exact definition escaped (``palui tools show``, the sheet)."""
        return self.hidden_ack == self.definition_hash

    @property
    def output_untrusted(self) -> bool:
        """Default taint of this tool's output, after trusted-source marks (spec §4)."""
        return self.untrusted_output and not (self.trusted_source or self.connector_trusted)

    def as_dict(self) -> Tool:
        """The ``palui tools list --json`` shape."""
        return {
            "name": self.name,
            "connector": self.connector,
            "tool": self.tool,
            "class": self.tool_class.value,
            "class_source": self.class_source.value,
            "enabled": self.enabled,
            "untrusted_output": self.output_untrusted,
            "trusted_source": self.trusted_source or self.connector_trusted,
            "changed": self.changed,
            "description": self.description,
            "annotations": self.annotations,
            "present": self.present,
            "hidden_characters": self.hidden,
            "look_alike_name": self.look_alike,
            "reaches_outside": self.reaches_outside,
            "reaches_outside_flag": self.outside_flag,
            "needs_tasks": self.needs_tasks,
            "schema_problem": self.schema_problem,
            "unreadable": self.unreadable,
        }

    @property
    def unreadable_notice(self) -> str | None:
        """What the person is told about a row that did not read (:attr:`unreadable`), naming the tool and
        the fix; None when it read."""
        if self.unreadable is None:
            return None
        fix = (f"palui tools review {self.name}" if self.changed and self.review is None
               else f"palui tools set-class {self.name} read|write|destructive")
        return (f"{escape(self.name, one_line=True)}: {self.unreadable}; it reads as class unknown (treated as "
                f"destructive) until you set one: {fix}")


_SELECT = (
    "SELECT t.*, c.trusted_source AS connector_trusted, c.enabled AS connector_enabled,"
    " c.private AS connector_private, c.state AS connector_state"
    " FROM tools t JOIN connectors c ON c.id = t.connector_id"
)


_CLASSES = {c.value: c for c in ToolClass}
_NOT_JSON = object()
_BASE_SOURCES = {ClassSource.BUILTIN.value: ClassSource.BUILTIN, ClassSource.HINTS.value: ClassSource.HINTS}


def stored_class(word: Any) -> ToolClass | None:
    """A stored class column read through its schema: the class, or None for NULL and for anything
    that is not exactly ``read``, ``write`` or ``destructive`` (a later version's word, a hand edit). A
    caller that must fail closed on a bad word reads the row with :func:`_row` (spec §2)."""
    return _CLASSES.get(word) if isinstance(word, str) else None


def _words(r: Any) -> tuple[ToolClass | None, ToolClass | None, ClassSource | None, list[str]]:
    """The person's class, the base class and its source of a stored row, each read through its schema;
    with the columns that held something else, as ``column 'value'`` (escaped, cut at 40 characters)."""
    bad: list[str] = []

    def word(column: str, table: dict[str, Any]) -> Any:
        value = r[column]
        if value is None:
            return None
        got = table.get(value) if isinstance(value, str) else None
        if got is None:
            shown = escape(str(value)[:40], one_line=True)
            bad.append(f"its stored {column} '{shown}' is not one of {', '.join(table)}")
        return got

    return word("user_class", _CLASSES), word("base_class", _CLASSES), word("base_source", _BASE_SOURCES), bad


def _json(r: Any, column: str, kinds: tuple[type, ...], empty: Any, bad: list[str]) -> Any:
    """A stored JSON column parsed and checked against its kinds; ``empty`` (and a note in ``bad``) when
    it does not parse or is of another kind."""
    raw = r[column]
    if raw is None and type(None) in kinds:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        value = _NOT_JSON
    if value is _NOT_JSON or not isinstance(value, kinds):
        bad.append(f"its stored {column} is not {'a JSON object' if dict in kinds else 'JSON'}")
        return empty
    return value


def _row(r) -> ToolRow:
    """A :class:`ToolRow` from a row of ``_SELECT``: every column read through its schema (spec §2, fail
    closed). A class word that is not one makes the whole class unknown (treated as destructive, never
    the base class under a bad choice of the person); a JSON column that does not read flags the tool
    for review (switched off, never offered). :attr:`ToolRow.unreadable` says what did not read."""
    user, base, src, bad = _words(r)
    if bad:
        cls, source = effective_class(None, None, None)
    else:
        cls, source = effective_class(user, base, src)
    json_bad: list[str] = []
    input_schema = _json(r, "input_schema", (dict,), {}, json_bad)
    annotations = _json(r, "annotations", (dict, type(None)), None, json_bad)
    review = _json(r, "review_json", (dict, type(None)), None, json_bad) if r["review_json"] else None
    if json_bad:
        cls, source = effective_class(None, None, None)
    problems = bad + json_bad
    return ToolRow(
        name=r["name"], connector=r["connector_id"], tool=r["raw_name"], description=r["description"],
        input_schema=input_schema, annotations=annotations,
        definition_hash=r["definition_hash"], tool_class=cls, class_source=source, user_class=user,
        enabled=bool(r["enabled"]) and not json_bad, untrusted_output=bool(r["untrusted_output"]),
        trusted_source=bool(r["trusted_source"]), changed=bool(r["changed"]) or bool(json_bad),
        review=review, present=bool(r["present"]),
        connector_trusted=bool(r["connector_trusted"]), hidden_ack=r["hidden_ack"], base_class=base,
        connector_enabled=bool(r["connector_enabled"]), outside_flag=bool(r["reaches_outside"]),
        connector_private=bool(r["connector_private"]),
        task_support=r["task_support"], connector_signin=r["connector_state"] == SIGN_IN_AGAIN,
        schema_problem=r["schema_problem"],
        unreadable="; ".join(problems) if problems else None,
    )


def list_tools(db: Database, connector: str | None = None, *, present_only: bool = False) -> list[ToolRow]:
    sql = _SELECT
    params: tuple = ()
    where = []
    if connector:
        where.append("t.connector_id = ?")
        params = (connector,)
    if present_only:
        where.append("t.present = 1")
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY t.connector_id, t.raw_name"
    return [_row(r) for r in db.all(sql, params)]


def get_tool(db: Database, name: str) -> ToolRow | None:
    r = db.one(_SELECT + " WHERE t.name = ?", (name,))
    return _row(r) if r else None


def ensure_connector(db: Database, cid: str, kind: str, name: str, *, transport: str | None = None,
                     config: dict[str, Any] | None = None) -> None:
    """Insert a connector row if missing (built-ins are registered on every start)."""
    with db.write() as c:
        c.execute(
            "INSERT OR IGNORE INTO connectors (id, kind, name, transport, config_json, created_at)"
            " VALUES (?,?,?,?,?,?)",
            (cid, kind, name, transport, json.dumps(config or {}, allow_nan=False), time.time()),
        )


def list_connectors(db: Database) -> list[dict[str, Any]]:
    rows = db.all(
        "SELECT c.*, (SELECT COUNT(*) FROM tools t WHERE t.connector_id = c.id AND t.present = 1) AS tools,"
        " (SELECT COUNT(*) FROM tools t WHERE t.connector_id = c.id AND t.present = 1 AND t.enabled = 1)"
        " AS enabled_tools"
        " FROM connectors c ORDER BY c.kind = 'mcp', c.id"
    )
    return [dict(r) for r in rows]
