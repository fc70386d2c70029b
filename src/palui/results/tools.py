"""Tools and connectors (spec §2, §3, §7), memories and tasks (spec §7.2)."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict

from palui.results.answers import ClassFields
from palui.types import JSON


class Tool(ClassFields):
    """A tool as ``palui tools list --json`` and ``GET /api/tools`` show it (spec §2, §7): ``name`` the
    model-visible name, ``tool`` the server's own; ``untrusted_output`` after trusted-source marks (spec
    §4.1); ``changed`` flagged for review (spec §7.6); ``present`` still listed by its server;
    ``hidden_characters`` (spec §4.7); ``look_alike_name`` (spec §7.5); ``reaches_outside`` and the person's
    ``reaches_outside_flag`` (spec §4.5); ``needs_tasks`` never offered (its server runs it only as an MCP task);
    ``schema_problem`` why its input schema is flagged, None when it is not (spec §7.6);
    ``unreadable`` what of its stored row did not read (then its class reads as unknown, spec §2), else None."""

    name: str
    connector: str
    tool: str
    enabled: bool
    untrusted_output: bool
    trusted_source: bool
    changed: bool
    description: str
    annotations: JSON | None
    present: bool
    hidden_characters: bool
    look_alike_name: bool
    reaches_outside: bool
    reaches_outside_flag: bool
    needs_tasks: bool
    schema_problem: str | None
    unreadable: str | None


class ReviewChange(TypedDict):
    """One part of a definition change that waits for review (spec §7.6), with its unified ``diff``."""

    field: str
    title: str
    previous: Any
    new: Any
    diff: str


class PendingReview(TypedDict):
    """The change a flagged tool waits with (spec §7.6): ``kind`` changed / loosened / tightened; pass
    ``fingerprint`` to accept exactly this change; the definition now and ``previous``."""

    kind: str
    fingerprint: str | None
    was_enabled: bool | None
    previous_user_class: str | None
    description: str | None
    input_schema: JSON | None
    annotations: JSON | None
    previous: JSON
    changes: list[ReviewChange]


class ToolDetails(Tool):
    """``palui tools show``: a :class:`Tool` with its stored definition and the change that waits, if any;
    ``schema_chars`` the input schema's size as a model is sent it (canonical JSON, descriptions cut)."""

    input_schema: JSON
    schema_chars: int
    definition_hash: str
    pending: PendingReview | None


class Explanation(ClassFields):
    """``palui policy explain``: the verdict for one tool in a turn of ``origin`` (spec §3.4); ``source``
    the rule that decided (``webhook``, ``switch``, ``matrix``, or ``client``: not the gateway client's to call);
    ``client`` the gateway client asked about (``--client``, spec §8.6); ``standing``: for an ``ask``, the standing
    approvals of that context that may answer it (spec §5.9), one line each."""

    tool: str
    origin: str
    tainted: bool
    verdict: str
    reason: str
    source: str
    standing: list[str]
    client: NotRequired[str]


class OAuthState(TypedDict):
    """An HTTP connector's sign-in (spec §7.9; no token): the issuer, when the token expires (epoch s), the
    ``scopes`` it holds (spec §7.11) and the step-ups ``waiting`` for the person (``s-…`` requests)."""

    signed_in: bool
    issuer: str | None
    expires_at: float | None
    scopes: NotRequired[list[str]]
    waiting: NotRequired[list[ScopeRequest]]


class ConnectorConfig(TypedDict):
    """An MCP connector's configuration, secret values redacted as ``***`` (spec §10.5); the timeout
    (seconds) and output limit (bytes) are the effective ones."""

    command: str | None
    args: list[str]
    cwd: str | None
    url: str | None
    env: dict[str, str]
    headers: dict[str, str]
    timeout_seconds: float
    max_output_bytes: int
    oauth: OAuthState | None


class Connector(TypedDict):
    """A connector as ``palui connectors list --json`` and ``GET /api/connectors`` show it (spec §7).

    ``kind`` builtin / mcp; ``state`` in this process (``idle`` when an MCP server was not started here,
    ``disabled``, ``connected``, ``error: …``, spec §7.7); ``private`` its results are the person's
    private data (spec §4.5); ``tools`` / ``enabled_tools`` counts. An MCP connector also has
    ``last_state`` (the last one stored by any process), its redacted ``config`` and, when it runs in this
    process, ``recovered``: when and why a session its server lost was started again (spec §7.10).
    """

    id: str
    kind: str
    name: str
    transport: str | None
    state: str
    trusted_source: bool
    private: bool
    tools: int
    enabled_tools: int
    last_state: NotRequired[str]
    config: NotRequired[ConnectorConfig]
    recovered: NotRequired[str | None]


class MCPConfig(ConnectorConfig):
    """One MCP connector's configuration (``palui connectors show``), with its states, whether it is
    ``enabled``, its secrets file, whether its questions may ask for secrets (``secret_questions``,
    spec §7.8), and its stderr log (stdio servers only)."""

    id: str
    name: str
    transport: str | None
    state: str
    last_state: str
    enabled: bool
    secrets_file: str
    secret_questions: bool
    stderr_log: str | None
    recovered: NotRequired[str | None]


ClassTightened = TypedDict("ClassTightened", {"tool": str, "from": str, "to": str})
ClassTightened.__doc__ = "A tool whose server's hints made its class stricter by themselves (spec §7.6)."


class SchemaFlagged(TypedDict):
    """A new tool whose input schema is flagged (spec §7.6): off until the person has seen it."""

    tool: str
    why: str


class ListingChanges(TypedDict):
    """What storing a server's listing changed (spec §7.6): tool names added, flagged ``changed``, tightened,
    with a loosening held for review, removed; raw names refused as duplicates; new tools whose input schema is
    flagged."""

    id: str
    added: list[str]
    changed: list[str]
    tightened: list[str]
    loosening_held: list[str]
    removed: list[str]
    refused_duplicates: list[str]
    class_tightened: list[ClassTightened]
    schema_flagged: list[SchemaFlagged]


class ConnectorSync(ListingChanges):
    """``palui connectors refresh``: what listing the server's tools again changed, and its ``state`` after;
    ``recovered`` says when and why a lost session was started again (spec §7.10), None when it was not."""

    state: str
    recovered: NotRequired[str | None]


class ScopeRequest(TypedDict):
    """A tool its server refused for a wider OAuth scope, waiting for the person (spec §7.11): ``needed`` the
    scopes beyond ``granted`` (those held when it was refused); ``status`` pending / granted (a sign-in gave
    them) / declined (the tool was switched off, ``reason`` says why); ``turn`` the turn whose call was refused;
    ``created_at`` epoch seconds; ``answered_via`` cli, web, api, a channel's name, or ``sign-in``. ``turn`` is
    ``""`` for a call made outside a turn."""

    id: str
    connector: str
    tool: str
    needed: list[str]
    granted: list[str]
    turn: str
    status: str
    reason: str | None
    created_at: float
    answered_via: str | None


class ConnectorAdded(ListingChanges):
    """``palui connectors add``: what the first listing stored, the server's ``name``, ``transport`` and
    ``state``, its ``tools`` and those switched on (``enabled``: the read ones with ``--enable-read``,
    spec §7.4)."""

    name: str
    transport: str
    state: str
    tools: list[str]
    enabled: list[str]


class Suggestion(TypedDict):
    """A class suggested for a tool its server sent no annotations for (spec §2.4): ``suggestion`` read /
    write / destructive, or None (unsure: it stays unknown), and why; ``tool`` and ``description`` are the
    server's own words."""

    name: str
    tool: str
    description: str
    suggestion: str | None
    reason: str


# -- memories and tasks (spec §7.2) ------------------------------------------------------------------------------


class Memory(TypedDict):
    """A memory: ``provenance`` trusted / untrusted (spec §4.2), ``source`` what wrote it, the ``turn``;
    ``created_at`` ISO 8601 UTC."""

    id: int
    text: str
    provenance: str
    source: str | None
    created_at: str | None
    turn: str | None


class Task(TypedDict):
    """A task: ``status`` open / done, ``due`` as written; provenance as for a :class:`Memory`."""

    id: int
    title: str
    notes: str
    status: str
    due: str | None
    provenance: str
    source: str | None
    created_at: str | None
    updated_at: str | None
    turn: str | None
