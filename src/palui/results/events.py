"""A turn's events (spec §11): one ``TypedDict`` per ``type``, and their union :data:`TurnEvent`."""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from palui.results.answers import ClassFields, UntrustedArg
from palui.types import JSON


class _Event(TypedDict):
    """What every event has: ``time`` (epoch seconds) and, when stored with the turn, its index ``seq``."""

    time: float
    seq: NotRequired[int]


class StepEvent(_Event):
    """A model request starts: step number (from 1) and the tools offered to it (spec §6.2)."""

    type: Literal["step"]
    step: int
    tools_offered: list[str]


class TextEvent(_Event):
    """The model's complete text of ``step`` (streamed before as ``text_delta`` pieces)."""

    type: Literal["text"]
    step: int
    text: str


class TextDeltaEvent(_Event):
    """A piece of the model's text as it streams (live only, never stored)."""

    type: Literal["text_delta"]
    step: int
    text: str


class TextDiscardedEvent(_Event):
    """The text streamed so far belongs to an attempt that failed and is retried (live only)."""

    type: Literal["text_discarded"]
    step: int
    reason: str


class RetryEvent(_Event):
    """The provider's request is retried (spec §9.3): ``attempt`` number, in ``in_seconds`` seconds."""

    type: Literal["retry"]
    step: int
    attempt: int
    in_seconds: float
    reason: str


class ToolStartEvent(_Event):
    """A call is sent to its connector (live only; its ``tool_call`` event follows)."""

    type: Literal["tool_start"]
    tool: str
    args: JSON


class ToolCallEvent(_Event):
    """One call decided and answered (spec §3, §10.3): its ``verdict`` and ``reason``, the ``result`` text
    the model was given (at most 4,000 characters), ``is_error``, whether the turn was ``tainted`` then.

    Optional marks: ``untrusted_output`` and ``duration_ms`` (milliseconds) for a call that ran;
    ``not_dispatched`` (a loop stop or the time budget kept it from running, spec §6.3), ``cancelled``
    (stopped while in flight: it may have run, spec §5.7), ``denied`` (the person said no, spec §5.5).
    """

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


class TaintedEvent(_Event):
    """The turn became tainted (spec §4.1): ``source`` names the content that tainted it."""

    type: Literal["tainted"]
    source: str | None


class ApprovalEvent(_Event, ClassFields):
    """A call waits for the person's approval ``approval`` (spec §5.1); ``expires_at`` ISO time."""

    type: Literal["approval"]
    approval: str
    tool: str
    args: JSON
    verdict: Literal["ask"]
    reason: str
    untrusted_args: list[UntrustedArg]
    expires_at: str


class ElicitationEvent(_Event):
    """A server asked the person question ``elicitation`` (spec §7.8), or Palui declined it itself
    (``status`` not ``pending``, with ``reason``); fields as in :class:`TurnElicitation`."""

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


class ElicitationAnswerEvent(_Event):
    """The answer to question ``elicitation`` went to the server: its ``action`` and the field names sent
    (never their values, spec §10.3)."""

    type: Literal["elicitation_answer"]
    elicitation: str
    action: str
    fields: list[str]


class EndEvent(_Event):
    """The turn ended: ``status`` done / stopped / budget / error (spec §11), with its answer, error and the
    budget that ended it."""

    type: Literal["end"]
    status: str
    answer: str | None
    error: str | None
    budget: str | None


class PausedEvent(_Event):
    """The turn pauses at a step boundary (the service shuts down) and goes on at the next start."""

    type: Literal["paused"]
    reason: str


class ScopeEvent(_Event):
    """A job's turn is offered only these connectors' tools (spec §8.4)."""

    type: Literal["scope"]
    connectors: list[str]


class ConnectorErrorEvent(_Event):
    """A connector's tools are not offered this turn, and why (a sign-in is due, spec §7.9)."""

    type: Literal["connector_error"]
    connector: str
    error: str


class ToolsLeftOutEvent(_Event):
    """Tools on but not offered this turn: more than ``budgets.tools`` (spec §6.2)."""

    type: Literal["tools_left_out"]
    tools: list[str]
    reason: str


#: One event of a turn, told by its ``type`` (stored: step, text, tool_call, tainted, approval, elicitation,
#: elicitation_answer, retry, scope, connector_error, tools_left_out, paused, end; live only: text_delta,
#: text_discarded, tool_start).
TurnEvent = (StepEvent | TextEvent | TextDeltaEvent | TextDiscardedEvent | RetryEvent | ToolStartEvent
             | ToolCallEvent | TaintedEvent | ApprovalEvent | ElicitationEvent | ElicitationAnswerEvent | EndEvent
             | PausedEvent | ScopeEvent | ConnectorErrorEvent | ToolsLeftOutEvent)
