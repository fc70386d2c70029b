"""The results the service hands its front ends, as types: the one definition of Palui's output shapes.

Every shape a front end reads is a ``TypedDict`` here, with its keys and value shapes exactly as the
service builds them (spec §11: keys are added, never renamed): a turn's result (``palui run --json``,
``POST /api/turns``) and its events (the NDJSON stream), an approval and a server's question, a tool and a
connector, ``/status``, a conversation, the inbox, the audit log, a job, a webhook, a chat channel. They are
plain dicts at run time (stored ``turn_events`` rows and ``json.dumps`` see no difference); mypy checks
every place that builds or reads one. Why TypedDicts, and how the HTTP API's schema is generated from them
(``pydantic.TypeAdapter(T).json_schema()``): ``docs/decisions/0150-result-types.md``.

Import them from here (``from palui.results import TurnResult``); the modules group them by concept:

- :mod:`~palui.results.answers`: approvals (spec §5) and a server's questions (spec §7.8);
- :mod:`~palui.results.events`: a turn's events, one type per ``type``, and their union :data:`TurnEvent`
  (:data:`EventFields`: the same before the runner stamps them);
- :mod:`~palui.results.turns`: a turn's result, its detail and stream lines, conversations;
- :mod:`~palui.results.tools`: tools, connectors, MCP configurations and listings, memories and tasks;
- :mod:`~palui.results.status`: ``/status``, the pause, the inbox, the audit log, the emergency brake;
- :mod:`~palui.results.triggers`: jobs, webhooks, chat channels;
- :mod:`~palui.results.gateway`: the gateway's clients, the tools it lists, a call's answer (spec §8.6);
- :mod:`~palui.results.api`: what the JSON API answers beyond these (health, a new conversation, the turns
  stopped, a refusal).

Conventions: ids are strings (``t-…`` turn, ``c-…`` conversation, ``a-…`` approval, ``e-…`` question, ``s-…``
a request for a wider scope),
except the integer rows of the audit, memories, tasks and sent messages. Times are ISO 8601 strings (UTC
unless a field says another zone) or, where a field says so, epoch seconds (float). Status words are
those of spec §11; a class is ``read`` / ``write`` / ``destructive`` (spec §2), a verdict ``run`` /
``ask`` / ``unavailable`` / ``off`` (spec §3), an origin ``chat`` / ``job`` / ``webhook`` (spec §1). A
key that is a Python keyword (``class``, ``from``) is declared with the functional ``TypedDict`` syntax.

A leaf: the package imports only ``typing``, ``typing_extensions`` and :mod:`palui.types`, so the
runner, the service and the front ends may all import it, and importing it costs under a millisecond
(no pydantic). ``typing_extensions.TypedDict``, because pydantic reads ``typing.TypedDict`` only from
Python 3.12 on. Each type carries pydantic's ``extra="forbid"`` (:func:`_forbid_extra_keys`, below), so
validating a real value against its type fails on a key the type forgets.
"""

from __future__ import annotations

from types import ModuleType

from typing_extensions import is_typeddict

from palui.results import answers, api, events, gateway, status, tools, triggers, turns
from palui.results.answers import (
    Approval,
    ClassFields,
    Elicitation,
    StandingApproval,
    TurnApproval,
    TurnElicitation,
    UntrustedArg,
)
from palui.results.api import ErrorAnswer, Health, NewConversation, Stopped
from palui.results.events import (
    ApprovalEvent,
    ConnectorErrorEvent,
    ElicitationAnswerEvent,
    ElicitationEvent,
    EndEvent,
    EventFields,
    EventStamp,
    LastStepEvent,
    PausedEvent,
    RetryEvent,
    ScopeEvent,
    StepEvent,
    TaintedEvent,
    TextDeltaEvent,
    TextDiscardedEvent,
    TextEvent,
    ToolCallEvent,
    ToolsLeftOutEvent,
    ToolStartEvent,
    TurnEvent,
)
from palui.results.gateway import GatewayCallResult, GatewayClient, GatewaySessionInfo, GatewayTool
from palui.results.status import (
    AsksSummary,
    AuditHead,
    AuditRow,
    Backup,
    ChannelLine,
    GatewayPause,
    InboxItem,
    JobsPause,
    PauseState,
    PendingApprovalLine,
    Pruned,
    Status,
    StatusCaps,
    StatusConnector,
    StopAll,
    WebhookShare,
)
from palui.results.tools import (
    ClassTightened,
    Connector,
    ConnectorAdded,
    ConnectorConfig,
    ConnectorSync,
    Explanation,
    ListingChanges,
    MCPConfig,
    Memory,
    OAuthState,
    PendingReview,
    ReviewChange,
    SchemaFlagged,
    ScopeRequest,
    Suggestion,
    Task,
    Tool,
    ToolDetails,
)
from palui.results.triggers import (
    ChatChannel,
    Delivery,
    DeliveryAccepted,
    DeliveryDuplicate,
    DeliveryReceipt,
    Job,
    MailAnswerAddress,
    MailThread,
    Named,
    OutboxItem,
    OutboxPart,
    PairCode,
    RenderedPart,
    SentMessage,
    ShownApproval,
    Webhook,
    WebhookCreated,
)
from palui.results.turns import (
    Conversation,
    ConversationSummary,
    ResultLine,
    StreamEvent,
    StreamLine,
    TurnDetail,
    TurnResult,
    TurnStoredLine,
    TurnUsage,
)

__all__ = [
    "Approval", "ApprovalEvent", "AsksSummary", "AuditHead", "AuditRow", "Backup", "ChannelLine", "ChatChannel",
    "ClassFields", "ClassTightened", "Connector", "ConnectorAdded", "ConnectorConfig", "ConnectorErrorEvent",
    "ConnectorSync", "Conversation", "ConversationSummary", "Delivery", "DeliveryAccepted", "DeliveryDuplicate",
    "DeliveryReceipt", "Elicitation", "ElicitationAnswerEvent", "ElicitationEvent", "EndEvent", "EventFields",
    "EventStamp", "Explanation", "GatewayPause", "InboxItem", "Job", "JobsPause", "ListingChanges", "MCPConfig",
    "Memory", "Named",
    "OAuthState", "OutboxItem", "OutboxPart", "PairCode", "PauseState", "PausedEvent", "PendingApprovalLine",
    "PendingReview", "Pruned", "RenderedPart", "ResultLine", "RetryEvent",
    "ReviewChange", "SchemaFlagged", "ScopeEvent", "ScopeRequest", "SentMessage", "ShownApproval", "StandingApproval",
    "Status",
    "StatusCaps",
    "StatusConnector",
    "StepEvent", "StopAll", "StreamEvent", "StreamLine", "Suggestion", "TaintedEvent", "Task", "TextDeltaEvent",
    "TextDiscardedEvent", "TextEvent", "Tool", "ToolCallEvent", "ToolDetails", "ToolStartEvent",
    "ToolsLeftOutEvent", "LastStepEvent", "TurnApproval", "TurnDetail", "TurnElicitation", "TurnEvent", "TurnResult",
    "TurnStoredLine", "TurnUsage", "UntrustedArg", "Webhook", "WebhookCreated", "WebhookShare",
    "ErrorAnswer", "Health", "NewConversation", "Stopped", "GatewayCallResult", "GatewayClient", "GatewaySessionInfo",
    "GatewayTool",
    "MailAnswerAddress", "MailThread",
]

MODULES: tuple[ModuleType, ...] = (answers, events, turns, tools, status, triggers, api, gateway)


def _forbid_extra_keys() -> None:
    """Give every type of :data:`MODULES` pydantic's ``extra="forbid"`` (its ``ConfigDict`` as a plain dict:
    this leaf imports no pydantic), so a key the service builds and a type forgets fails validation. Set on
    each class, bases included: pydantic reads it on the class it validates, not through its bases."""
    for module in MODULES:
        for value in vars(module).values():
            if is_typeddict(value):
                value.__pydantic_config__ = {"extra": "forbid"}


_forbid_extra_keys()
