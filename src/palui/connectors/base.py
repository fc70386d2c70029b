"""The connector interface every source of tools implements (spec §7).

A connector lists :class:`ToolSpec` s and executes calls, returning
:class:`ToolResult` s. The policy never lives here: by the time ``call_tool`` runs,
the turn runner has decided the call may run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from palui.types import Notify, Origin, ToolClass

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.connectors.mcp.config import TransportFactory
    from palui.store.db import Database
    from palui.store.tools import ToolRow


@dataclass(frozen=True)
class ToolSpec:
    """One tool as its connector declares it.

    ``annotations`` is the raw MCP annotations JSON exactly as sent (None if absent);
    ``declared_class`` is set only by built-in connectors (class source ``builtin``);
    ``untrusted_output`` is the default taint of its results (spec §4). ``task_support`` is an
    MCP tool's ``execution.taskSupport`` (``forbidden``/``optional``/``required``, None when
    absent; MCP 2025-11-25 "Tasks"): a ``required`` tool is never offered (Palui does not do tasks).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None
    declared_class: ToolClass | None = None
    untrusted_output: bool = True
    task_support: str | None = None


@dataclass(frozen=True)
class Question:
    """One question an MCP server asks the person: an elicitation (MCP 2025-11-25 "Elicitation";
    on 2026-07-28 an input request of an ``input_required`` result). Never shown to the model.

    ``key`` is the input-request key (2026-07-28) or the JSON-RPC id of the server's request
    (older connections); ``mode`` ``form`` (``schema`` is the requested schema, as sent) or ``url``
    (``url``, and the server's ``elicitation_id``).
    """

    key: str
    mode: Literal["form", "url"]
    message: str
    schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


@dataclass(frozen=True)
class Reply:
    """The answer sent back for a :class:`Question`: ``accept`` (with ``content`` for a form),
    ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


@dataclass(frozen=True)
class InputRequired:
    """A 2026-07-28 ``tools/call`` that answered ``input_required``: the questions to put to the person
    and the server's opaque ``request_state``, to be sent back with the answers (MCP 2026-07-28,
    "Multi round-trip requests"). ``other`` are keys of input requests that are not elicitations
    (sampling, roots: Palui offers neither)."""

    questions: tuple[Question, ...]
    request_state: str | None
    other: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resume:
    """What a retried 2026-07-28 call sends: one :class:`Reply` per question key and the request state."""

    replies: dict[str, Reply]
    request_state: str | None


Ask = Callable[[Question], Awaitable[Reply]]
#: ``progress(done, total, message)``: a progress notification for whoever waits on a call.
Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class ToolResult:
    """The outcome of one call.

    ``text`` is what the model sees. ``is_error`` marks a tool error (still shown to
    the model). ``untrusted`` is this result's taint: None means "use the tool's
    default" (its ``untrusted_output`` flag, unless the tool or connector is a trusted
    source). ``untrusted_texts`` are the untrusted strings the result carried (used to
    mark approval arguments, spec §4); empty means "the whole text" when untrusted.
    ``taint_detail`` says why it is untrusted (e.g. "memory 4 has untrusted provenance").
    ``input_required`` is set (and ``text`` empty) when a 2026-07-28 server needs answers from
    the person before the call can finish: the runner asks and calls again with ``CallContext.resume``.
    ``may_have_run`` marks a call whose server was lost after the call went out (spec §7.10): it is
    audited ``cancelled; may have run`` and never sent again. ``connector_down`` says why the connector
    could not take the call (it did not start, its connection closed, it needs a sign-in; spec §8.4's
    connector health), None when its server answered. ``wire`` is the MCP ``CallToolResult`` as its server sent
    it (JSON, every content type, ``structuredContent``, ``isError``; cut to the output limit), set only when the
    call asked for it (``CallContext.raw``: a gateway client's call, spec §8.6).
    """

    text: str
    is_error: bool = False
    untrusted: bool | None = None
    untrusted_texts: list[str] = field(default_factory=list)
    taint_detail: str | None = None
    input_required: InputRequired | None = None
    may_have_run: bool = False
    connector_down: str | None = None
    wire: dict[str, Any] | None = None


@dataclass
class CallContext:
    """What a tool call may know about its turn.

    ``tainted`` is whether the turn is tainted *at the moment of the call*: writes
    made during a tainted turn store ``untrusted`` provenance (spec §4). ``ask`` puts a server's
    question to the person while the call stays open (older MCP connections; None: every question
    is declined); ``resume`` carries the answers of a 2026-07-28 retry (spec §7). ``tool`` is the tool's
    stored row as the runner read it when it decided the call (None: the connector reads it), so a
    connector need not read it again. ``writer`` names a caller whose writes are untrusted whatever the taint (a
    gateway client, spec §8.6: ``gateway client coder``), None for a turn. ``raw``: the caller wants the result as
    the server sent it (:attr:`ToolResult.wire`); ``progress`` is told the server's progress notifications
    (``progress(done, total, message)``), both a gateway client's.
    """

    turn_id: str
    conversation_id: str
    origin: Origin
    tainted: bool
    taint_source: str | None
    step: int
    db: Database
    settings: Settings
    notifier: PersonChannel | None = None
    ask: Ask | None = None
    resume: Resume | None = None
    tool: ToolRow | None = None
    writer: str | None = None
    raw: bool = False
    progress: Progress | None = None


class PersonChannel(Notify, Protocol):
    """The person's channel as a connector sees it (spec §1): :class:`~palui.types.Notify` plus a
    delivery that waits, for ``messages__send_message``, which reports what was delivered."""

    async def send_now(self, kind: str, text: str, *, turn_id: str | None = None,
                       conversation_id: str | None = None) -> list[str]:
        """Write the inbox, deliver to every target and wait; returns one secret-free failure text
        per target that did not accept it (never raises)."""
        ...


@dataclass(frozen=True)
class ConnectorEnv:
    """What connectors (and the hub that creates them) may use: the database, the settings and
    the person's channel. Never the service (docs/architecture.md: who may import whom)."""

    db: Database
    settings: Settings
    notify: Notify
    #: Called after a listing changed stored tools (flagged, removed, reclassed): the service
    #: re-decides pending approvals then (spec §5). None: nothing to call.
    on_change: Callable[[], object] | None = None
    #: How MCP connectors reach their servers (:data:`~palui.connectors.mcp.config.TransportFactory`);
    #: None: the configured command or URL, as always outside the test suite.
    mcp_transport: TransportFactory | None = None


class Connector(ABC):
    """A source of tools with a stable id (``recall``, ``mcp-notes``…)."""

    id: str
    kind: str = "builtin"

    @abstractmethod
    async def list_tools(self) -> list[ToolSpec]:
        """The tools this connector offers now. Raises ConnectorError when it cannot list."""

    @abstractmethod
    async def call_tool(self, name: str, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        """Execute the raw tool ``name`` with ``args``. Errors are returned as ``is_error`` results."""

    async def close(self) -> None:  # noqa: B027  (optional hook: most connectors hold nothing to release)
        """Release resources (processes, sessions). Default: nothing."""

    def state(self) -> str:
        """``connected``, ``connecting``, ``error: …`` or ``disabled`` (spec §7)."""
        return "connected"

    def blocked(self) -> str | None:
        """Why this connector cannot be used until the person acts (an MCP server that needs a sign-in),
        or None. The hub refuses a blocked connector, so its tools are not offered."""
        return None
