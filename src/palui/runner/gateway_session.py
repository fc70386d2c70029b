"""A gateway session's door to the governed call (spec §8.6; docs/decisions/0176-one-governed-call.md).

Another MCP client's call runs through :meth:`GovernedCall.run <palui.runner.governed_call.GovernedCall.run>`,
the same steps in the same order as a turn's calls. :class:`GatewaySession` holds no step: it reads the session
and hands the gateway's :class:`~palui.runner.call_options.CallOptions`:

- the client names every audit row and approval (``client``);
- the brake's pause of the gateway, or the session's stop, refuses the call and the session goes on
  (``halted``, ``halt_stops`` False); a call in flight is cancelled by either within a second (``guard``);
- a call has its own time (``time_left``: :data:`CALL_SECONDS`; the connector's start at most 30 s of it);
- the loop rules and the person's denials count the client's calls, every session, until the person clears
  the client (``history``, ``scope``), its reads never as repeats (``read_repeats``);
- the client's offer: the tools of its connectors, MCP tools only (``offer``);
- ``caps.gateway_calls_per_hour`` (``cap``);
- an ask waits ``gateway.wait_seconds`` for the person's answer, and an identical later call of the session
  waits on or consumes it (``approval`` ``wait``);
- a server's questions during the call are refused (``questions`` False);
- the client's context is unseen, so the Rule of Two fails closed (``unknown_context``).

A session is a turn row of its client's conversation (every session of the client shares it: its taint, its
untrusted content, its approvals), which no process runs and nothing resumes. Its taint is read again at every
call, so a result that tainted another session of the client taints this one too. Its calls in flight are its
``pending`` while they run: the durable ``sent`` marker of each, so a session stopped or a service that died
with one in flight audits it ``cancelled; may have run``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from palui.connectors.base import ToolResult
from palui.runner import gateway_pause
from palui.runner import state as st
from palui.runner.call_history import ClientHistory
from palui.runner.call_options import CallOptions
from palui.runner.caps import gateway_over_cap
from palui.runner.governed_call import GovernedCall
from palui.runner.offer import is_builtin
from palui.runner.pending import CallState, read_call
from palui.runner.state import EarlierTurns, Turn
from palui.runner.stop_guard import StopGuard, StopRequested
from palui.runner.turn_events import TurnEvents

if TYPE_CHECKING:
    from palui.runner.call_options import Progress
    from palui.runner.deps import RunnerDeps
    from palui.store.tools import ToolRow

#: Why a gateway session's context is unseen (spec §8.6): its taint source, and why the Rule of Two fails closed.
UNKNOWN_CONTEXT = "the client's context is unknown"
#: Seconds a gateway call may take at most, its connector's start included (the connector's own limits apply
#: first; a wait for the person does not count).
CALL_SECONDS = 300.0
ENDED = "Error: this gateway session has ended; start a new session."
STOPPED_IN_FLIGHT = "Error: the call was stopped while it ran, and it may have run: {why}."


@dataclass(frozen=True)
class Scope:
    """Who calls: the client's ``name`` and the connectors it was given (None: every connector)."""

    name: str
    connectors: tuple[str, ...] | None


class GatewaySession:
    """The calls of one gateway session.

    Args:
        deps: the database, settings, connector hub and the person's channel.
        scope: the calling client.
        turn_id: the session's turn row.
        wait_seconds: how long a call waits for the person's answer (``gateway.wait_seconds``).
        turns: the session turns this process holds, by id: a session's turn is loaded once and kept (its
            events grow with every call; reading them all again per call would make a call's cost grow with
            the session), and the calls of one session share it. Its status, stop flag and conversation's
            taint, which other processes and sessions change, are read again at each call.
    """

    def __init__(self, deps: RunnerDeps, scope: Scope, turn_id: str, wait_seconds: float,
                 turns: dict[str, Turn]) -> None:
        self._deps = deps
        self._scope = scope
        self._turn_id = turn_id
        self._wait = wait_seconds
        self._turns = turns
        self._events = TurnEvents(None)

    async def call(self, tool: str, args: Any, progress: Progress | None = None) -> ToolResult:
        """Run ``tool(args)`` through the governed call for this session. Returns what the client is told: the
        tool's result, or an error result saying why it did not run."""
        db = self._deps.db
        now = db.one("SELECT t.status, t.stop_requested, t.conversation_id, c.tainted, c.taint_source FROM turns t"
                      " JOIN conversations c ON c.id = t.conversation_id WHERE t.id = ?", (self._turn_id,))
        t = self._turns.get(self._turn_id) or (st.load(db, self._turn_id) if now is not None else None)
        if now is None or now["status"] != "running" or t is None:
            self._turns.pop(self._turn_id, None)
            return ToolResult(ENDED, is_error=True)
        self._turns[self._turn_id] = t
        t.stop_requested = bool(now["stop_requested"])
        if now["tainted"] and not t.tainted:  # another session of the client was tainted: the client carries it
            t.tainted, t.taint_source = True, now["taint_source"]
        call = read_call(st.new_id("gc"), tool, args)
        t.steps += 1  # a gateway session's step is a call (the taint source names it)
        started = time.monotonic()
        options = CallOptions(
            client=self._scope.name, halted=self._halted, halt_stops=False,
            time_left=lambda _t: CALL_SECONDS - (time.monotonic() - started),
            guard=StopGuard(db, lambda: 0.0, self._stopped),
            history=ClientHistory(db, self._scope.name, t.conversation_id), scope="client", offer=self._offered,
            cap=lambda: gateway_over_cap(db, self._deps.settings), approval="wait", questions=False,
            save=lambda turn: st.save(db, turn), wait_seconds=self._wait, progress=progress,
            unknown_context=UNKNOWN_CONTEXT, read_repeats="uncounted")
        governed = GovernedCall(self._deps, options, self._events, EarlierTurns(db))
        t.pending = [*(t.pending or []), call]  # in flight: its sent marker is stored with the session
        try:
            await governed.run(t, call)
        except StopRequested:  # the brake or a stop while the call ran: the sender audited "cancelled; may have run"
            call["result"] = STOPPED_IN_FLIGHT.format(why=self._halted(t) or "stopped")
            call["is_error"], call["state"] = True, CallState.DONE
            options.history.record(t, call, False)
        finally:
            t.pending = [c for c in t.pending or [] if c is not call] or None
            st.save(db, t)
        return ToolResult(call.get("result", "Error: the call was not run."), is_error=bool(call.get("is_error")))

    def _halted(self, t: Turn) -> str | None:
        """The gateway's brake step: the brake's pause of the gateway, or this session's stop flag."""
        db = self._deps.db
        if gateway_pause.paused(db) is not None:
            return gateway_pause.PAUSED
        return "the session was stopped" if st.stop_requested(db, t.id) else None

    def _stopped(self, turn_id: str) -> bool:
        """What the call in flight runs under: the brake's pause of the gateway, or the session's stop flag."""
        db = self._deps.db
        return gateway_pause.paused(db) is not None or st.stop_requested(db, turn_id)

    def _offered(self, t: Turn, row: ToolRow | None, name: str) -> str | None:
        """The client's offer: the tools of its connectors, MCP tools only (spec §8.6)."""
        connectors = self._scope.connectors
        if row is None or is_builtin(row) or (connectors is not None and row.connector not in connectors):
            return "no tool of this client has this name"
        return None
