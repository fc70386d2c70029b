"""A turn's result (spec §11), its stream lines, and conversations (spec §8.2)."""

from __future__ import annotations

from typing import Literal, NotRequired

from typing_extensions import TypedDict

from palui.results.answers import Elicitation, TurnApproval, TurnElicitation
from palui.results.events import TurnEvent
from palui.results.status import PauseState


class TurnUsage(TypedDict):
    """What a turn used (spec §6.1): model requests (``steps``), counted ``seconds`` and tokens."""

    steps: int
    seconds: float
    input_tokens: int
    output_tokens: int
    tokens: int


class TurnResult(TypedDict):
    """A turn as ``palui run --json`` and ``POST /api/turns`` show it (spec §11).

    ``status`` done / awaiting_approval / queued / stopped / budget / error / running; ``events`` the
    turn's events (all stored ones, or those of the run that just happened); ``budget`` the budget that
    ended it; ``pending_approvals`` / ``pending_elicitations`` what it waits for. A queued turn waiting
    behind another of its conversation has ``queued_behind`` (that turn) and ``queued_reason``; one held by
    a cap has ``queued_reason`` (the cap) and ``start_after`` (ISO time, or None when unknown, spec §6.5).
    """

    status: str
    answer: str | None
    conversation: str
    turn: str
    origin: str
    events: list[TurnEvent]
    usage: TurnUsage
    tainted: bool
    taint_source: str | None
    error: str | None
    budget: str | None
    pending_approvals: list[TurnApproval]
    pending_elicitations: list[TurnElicitation]
    queued_behind: NotRequired[str]
    queued_reason: NotRequired[str]
    start_after: NotRequired[str | None]


class TurnDetail(TurnResult):
    """A turn as a conversation shows it (``ConversationsPart.turn_detail``): its :class:`TurnResult` with the person's
    ``input``, ``created_at`` (epoch seconds), each approval it asked for and each question a server asked
    during it, by id, as they are now, and, while it is queued, the ``pause`` it may wait for."""

    input: str
    created_at: float
    approvals: dict[str, TurnApproval]
    elicitations: dict[str, Elicitation]
    pause: NotRequired[PauseState]


class TurnStoredLine(TypedDict):
    """The first line of a turn's NDJSON stream: the turn is stored (spec §8.1)."""

    type: Literal["turn"]
    turn: str
    conversation: str | None


class ResultLine(TurnResult):
    """The last line of a turn's NDJSON stream: its :class:`TurnResult`."""

    type: Literal["result"]


#: A line of ``POST /api/turns`` with ``stream`` (and of a followed turn): the stored line, events, the result.
StreamLine = TurnStoredLine | TurnEvent | ResultLine
#: What a client of the stream hands its listener as it reads: every line but the result (which it returns).
StreamEvent = TurnStoredLine | TurnEvent


# -- conversations (spec §8.2) ---------------------------------------------------------------------------------


class ConversationSummary(TypedDict):
    """A conversation in a list, newest first: ``title`` its first turn's input, ``last`` and ``created_at``
    epoch seconds, ``turns`` how many, ``live`` how many run, wait for approval or are queued; ``channel``
    where it was started (None when not recorded)."""

    id: str
    origin: str
    channel: str | None
    tainted: bool
    taint_source: str | None
    created_at: float
    title: str | None
    last: float | None
    turns: int
    live: int


class Conversation(TypedDict):
    """One conversation with each of its turns (``created_at`` epoch seconds); ``model`` the model string its
    newest turn that named one was run with (None: every turn took the configured model), which ``palui chat
    --resume`` goes on with."""

    id: str
    origin: str
    channel: str | None
    created_at: float
    tainted: bool
    taint_source: str | None
    turns: list[TurnDetail]
    model: str | None
