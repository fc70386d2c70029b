"""A turn's events (spec §11): one ``TypedDict`` per ``type``, and their union :data:`TurnEvent`.

Each event type comes in two: ``…Fields``, what a collaborator of the runner reports (``emit(turn,
{"type": "step", …})``, checked by mypy against :data:`EventFields`), and ``…Event``, the same stamped
with :class:`EventStamp` (``time``, and ``seq`` once stored), as the turn stores it and front ends read it.
"""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from palui.results.answers import ClassFields, UntrustedArg
from palui.types import JSON


class EventStamp(TypedDict):
    """What every event handed out has: ``time`` (epoch seconds) and, when stored with the turn, its index
    ``seq`` in the turn's events (live pieces have none)."""

    time: float
    seq: NotRequired[int]


class StepFields(TypedDict):
    """What the runner reports for a :class:`StepEvent` (before its stamp)."""

    type: Literal["step"]
    step: int
    tools_offered: list[str]


class StepEvent(StepFields, EventStamp):
    """A model request starts: step number (from 1) and the tools offered to it (spec §6.2)."""


class TextFields(TypedDict):
    """What the runner reports for a :class:`TextEvent` (before its stamp)."""

    type: Literal["text"]
    step: int
    text: str


class TextEvent(TextFields, EventStamp):
    """The model's complete text of ``step`` (streamed before as ``text_delta`` pieces)."""


class TextDeltaFields(TypedDict):
    """What the runner reports for a :class:`TextDeltaEvent` (before its stamp)."""

    type: Literal["text_delta"]
    step: int
    text: str


class TextDeltaEvent(TextDeltaFields, EventStamp):
    """A piece of the model's text as it streams (live only, never stored)."""


class TextDiscardedFields(TypedDict):
    """What the runner reports for a :class:`TextDiscardedEvent` (before its stamp)."""

    type: Literal["text_discarded"]
    step: int
    reason: str


class TextDiscardedEvent(TextDiscardedFields, EventStamp):
    """The text streamed so far belongs to an attempt that failed and is retried (live only)."""


class RetryFields(TypedDict):
    """What the runner reports for a :class:`RetryEvent` (before its stamp)."""

    type: Literal["retry"]
    step: int
    attempt: int
    in_seconds: float
    reason: str


class RetryEvent(RetryFields, EventStamp):
    """The provider's request is retried (spec §9.3): ``attempt`` number, in ``in_seconds`` seconds."""


class ToolStartFields(TypedDict):
    """What the runner reports for a :class:`ToolStartEvent` (before its stamp)."""

    type: Literal["tool_start"]
    tool: str
    args: JSON


class ToolStartEvent(ToolStartFields, EventStamp):
    """A call is sent to its connector (live only; its ``tool_call`` event follows)."""


class ToolCallFields(TypedDict):
    """What the runner reports for a :class:`ToolCallEvent` (before its stamp)."""

    type: Literal["tool_call"]
    tool: str
    args: JSON
    verdict: str
    reason: str
    result: str
    is_error: bool
    tainted: bool
    untrusted_output: NotRequired[bool]
    duration_ms: NotRequired[float]
    not_dispatched: NotRequired[bool]
    cancelled: NotRequired[bool]
    denied: NotRequired[bool]


class ToolCallEvent(ToolCallFields, EventStamp):
    """One call decided and answered (spec §3, §10.3): its ``verdict`` and ``reason``, the ``result`` text
    the model was given (at most 4,000 characters), ``is_error``, whether the turn was ``tainted`` then.

    Optional marks: ``untrusted_output`` and ``duration_ms`` (milliseconds) for a call that ran;
    ``not_dispatched`` (a loop stop or the time budget kept it from running, spec §6.3), ``cancelled``
    (stopped while in flight: it may have run, spec §5.7), ``denied`` (the person said no, spec §5.5).
    """


class TaintedFields(TypedDict):
    """What the runner reports for a :class:`TaintedEvent` (before its stamp)."""

    type: Literal["tainted"]
    source: str | None


class TaintedEvent(TaintedFields, EventStamp):
    """The turn became tainted (spec §4.1): ``source`` names the content that tainted it."""


class ApprovalFields(ClassFields):
    """What the runner reports for an :class:`ApprovalEvent` (before its stamp)."""

    type: Literal["approval"]
    approval: str
    tool: str
    args: JSON
    verdict: Literal["ask"]
    reason: str
    untrusted_args: list[UntrustedArg]
    expires_at: str


class ApprovalEvent(ApprovalFields, EventStamp):
    """A call waits for the person's approval ``approval`` (spec §5.1); ``expires_at`` ISO time."""


class ElicitationFields(TypedDict):
    """What the runner reports for an :class:`ElicitationEvent` (before its stamp)."""

    type: Literal["elicitation"]
    elicitation: str
    tool: str
    connector: str
    mode: str
    message: str
    url: str | None
    url_host: str | None
    fields: list[str]
    status: str
    reason: str | None
    expires_at: str | None
    era: str


class ElicitationEvent(ElicitationFields, EventStamp):
    """A server asked the person question ``elicitation`` (spec §7.8), or Palui declined it itself
    (``status`` not ``pending``, with ``reason``); fields as in :class:`TurnElicitation`."""


class ElicitationAnswerFields(TypedDict):
    """What the runner reports for an :class:`ElicitationAnswerEvent` (before its stamp)."""

    type: Literal["elicitation_answer"]
    elicitation: str
    action: str
    fields: list[str]


class ElicitationAnswerEvent(ElicitationAnswerFields, EventStamp):
    """The answer to question ``elicitation`` went to the server: its ``action`` and the field names sent
    (never their values, spec §10.3)."""


class EndFields(TypedDict):
    """What the runner reports for an :class:`EndEvent` (before its stamp)."""

    type: Literal["end"]
    status: str
    answer: str | None
    error: str | None
    budget: str | None
    health: NotRequired[str]


class EndEvent(EndFields, EventStamp):
    """The turn ended: ``status`` done / stopped / budget / error, or for a job partial / failed (spec §11),
    with its answer, error and the budget that ended it; an unattended turn's ``health`` is its
    connector-health line (spec §8.4)."""


class PausedFields(TypedDict):
    """What the runner reports for a :class:`PausedEvent` (before its stamp)."""

    type: Literal["paused"]
    reason: str


class PausedEvent(PausedFields, EventStamp):
    """The turn pauses at a step boundary (the service shuts down) and goes on at the next start."""


class ScopeFields(TypedDict):
    """What the runner reports for a :class:`ScopeEvent` (before its stamp)."""

    type: Literal["scope"]
    connectors: list[str]


class ScopeEvent(ScopeFields, EventStamp):
    """A job's turn is offered only these connectors' tools (spec §8.4)."""


class ConnectorErrorFields(TypedDict):
    """What the runner reports for a :class:`ConnectorErrorEvent` (before its stamp)."""

    type: Literal["connector_error"]
    connector: str
    error: str


class ConnectorErrorEvent(ConnectorErrorFields, EventStamp):
    """A connector's tools are not offered this turn (a sign-in is due, spec §7.9), or a call to it could not
    reach its server (it did not start, its connection closed), and why (spec §8.4)."""


class ToolsLeftOutFields(TypedDict):
    """What the runner reports for a :class:`ToolsLeftOutEvent` (before its stamp)."""

    type: Literal["tools_left_out"]
    tools: list[str]
    reason: str


class ToolsLeftOutEvent(ToolsLeftOutFields, EventStamp):
    """Tools on but not offered this turn: more than ``budgets.tools`` (spec §6.2)."""


class LastStepFields(TypedDict):
    """What the runner reports for a :class:`LastStepEvent` (before its stamp)."""

    type: Literal["last_step"]
    reason: str


class LastStepEvent(LastStepFields, EventStamp):
    """A guard ended the turn's tool use for ``reason``: the model gets one last step without tools to
    answer (spec §6.3); the turn then ends with status ``budget``."""


#: What a collaborator of the runner reports (an event before its stamp), told by its ``type``.
EventFields = (StepFields | TextFields | TextDeltaFields | TextDiscardedFields | RetryFields | ToolStartFields
               | ToolCallFields | TaintedFields | ApprovalFields | ElicitationFields | ElicitationAnswerFields
               | EndFields | PausedFields | ScopeFields | ConnectorErrorFields | ToolsLeftOutFields
               | LastStepFields)

#: One event of a turn, told by its ``type`` (stored: step, text, tool_call, tainted, approval, elicitation,
#: elicitation_answer, retry, scope, connector_error, tools_left_out, last_step, paused, end; live only:
#: text_delta, text_discarded, tool_start).
TurnEvent = (StepEvent | TextEvent | TextDeltaEvent | TextDiscardedEvent | RetryEvent | ToolStartEvent
             | ToolCallEvent | TaintedEvent | ApprovalEvent | ElicitationEvent | ElicitationAnswerEvent | EndEvent
             | PausedEvent | ScopeEvent | ConnectorErrorEvent | ToolsLeftOutEvent | LastStepEvent)
