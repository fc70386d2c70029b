"""What a door chooses for its calls: every difference between a turn's calls and a gateway session's, by name
(spec §8.6, "What differs between the doors"; docs/decisions/0176-one-governed-call.md).

The governed call (:mod:`palui.runner.governed_call`) has one list of steps. A door never adds, drops or
reorders one: it hands :class:`CallOptions`, and each option is read by one step. Each field below says which
step reads it and what each door gives; docs/spec.md §8.6 says why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from palui.connectors.base import Progress as Progress  # a gateway client's progress notifications

if TYPE_CHECKING:
    from palui.connectors.base import Ask

if TYPE_CHECKING:
    from palui.runner.call_history import CallHistory
    from palui.runner.state import Turn
    from palui.runner.stop_guard import StopGuard
    from palui.store.tools import ToolRow


class CallCap(Protocol):
    """A door's cap on calls (the gateway's: :class:`~palui.runner.gateway_cap.GatewayCap`)."""

    def over(self) -> str | None:
        """Step ``cap``: why one more call would pass the cap, saying when the next is possible; None if not."""

    def take(self) -> str | None:
        """Step ``send``: count the call about to be sent; a reason (and nothing counted) when the cap was
        reached since step ``cap``."""


@dataclass(frozen=True)
class CallOptions:
    """A door's options.

    - ``client`` and ``session`` (every step that writes: the audit, approvals): None for a turn; a gateway
      client's name and session, which every audit row carries in columns of its own, and every approval's reason
      names (the client).
    - ``halted`` (step ``stopped``): why a call must not go on now, or None. Turn: its stop flag (``/stop``, the
      brake); gateway: the brake's pause of the gateway, or the session's stop flag.
    - ``halt_stops`` (step ``stopped``): True, a halt stops the whole turn (:class:`StopRequested`); False, the
      call is refused with the halt's reason and the session goes on (a gateway session has no run to stop).
    - ``time_left`` (steps ``time``, ``connected``, ``send``): seconds left to start the connector and run the
      call. Turn: its clock (``budgets.seconds``); gateway: the call's own bound.
    - ``guard`` (step ``send``): what the call in flight runs under. Turn: its stop flag; gateway: the brake's
      pause too.
    - ``history`` (step ``loops``) and ``scope`` (steps ``loops``, ``denied``): whose calls the loop rules and the
      person's denials count. Turn: the turn's (``turn``); gateway: the client's, every session, until the
      person clears it (``client``).
    - ``offer`` (step ``offered``): why a tool is not this door's to call (None: it is). Turn: the set offered at
      its start (the tool budget, a job's connectors); gateway: the client's connectors, MCP tools only.
    - ``cap`` (steps ``cap``, ``send``): the cap on calls, or None. Turn: none (caps admit turns, spec §6.4);
      gateway: the client's calls per hour and ``caps.gateway_calls_per_hour`` over every client, counting only
      the calls sent to a connector (:class:`~palui.runner.gateway_cap.GatewayCap`).
    - ``approval`` (steps ``answered``, ``gate``): ``pause`` (an ask pauses the turn durably; it resumes when
      answered) or ``wait`` (the call waits ``wait_seconds`` for the answer, telling ``progress``, and stops
      waiting when ``gone`` says its caller left; then an error naming the approval, which runs nothing by
      itself: an identical later call of the client, in any session, waits on or consumes it: step ``retry``).
    - ``questions`` (step ``send``): a server's questions during the call go to the person (both doors; a turn
      pauses on a round of them, a gateway call waits ``wait_seconds`` for the answers), or, with ``forward``
      (a gateway client that is trusted and declared elicitation: ``(ask, client)``), a form asking for no
      secret goes to the client itself.
    - ``result`` (step ``send``): what a sent call's answer keeps. Turn: ``text``, what the model reads; gateway:
      ``wire`` too, the server's result as it sent it (every content type, ``structuredContent``, ``isError``),
      and the server's progress is told ``progress``.
    - ``unknown_context`` (step ``rule_of_two``): None for a turn, whose model's context Palui sees; a gateway
      client's: why its context is unseen, so the Rule of Two fails closed (an address not reached earlier by the
      client asks).
    - ``save`` (steps ``gate``, ``send``): persists the turn (the durable ``sent`` marker, an approval's event).
    - ``read_repeats`` (step ``loops``): how a repeated ``read`` counts (spec §6.3). Turn: ``earlier`` (the N-th
      identical read whose results were all identical is answered with that result, the (N+1)-th ends the tool
      use); gateway: ``uncounted`` (a client's reads span sessions and days: never a repeat, each one sent).
    """

    client: str | None
    halted: Callable[[Turn], str | None]
    halt_stops: bool
    time_left: Callable[[Turn], float]
    guard: StopGuard
    history: CallHistory
    scope: Literal["turn", "client"]
    offer: Callable[[Turn, ToolRow | None, str], str | None]
    cap: CallCap | None
    approval: Literal["pause", "wait"]
    questions: bool
    save: Callable[[Turn], None]
    wait_seconds: float = 0.0
    session: str | None = None
    gone: Callable[[], bool] | None = None
    result: Literal["text", "wire"] = "text"
    forward: tuple[Ask, str] | None = None
    progress: Progress | None = None
    unknown_context: str | None = None
    read_repeats: Literal["earlier", "uncounted"] = "earlier"
