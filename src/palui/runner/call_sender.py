"""Sending one decided call to its connector and recording what came back (spec §4, §5, §7).

:class:`CallSender` is held by the pending-calls walk (:mod:`palui.runner.pending_calls`). Before a call is
sent it is marked ``sent`` and the turn saved, so a crash from there on never sends it twice; an
approved call is decided again first (:meth:`ApprovalGate.recheck`). The call runs under the turn's
stop guard and time left. A 2026-07-28 server that answers with questions for the person pauses the
call (:class:`~palui.runner.elicitations.ServerQuestions`); the sender sends it again with the answers.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from palui.connectors.base import CallContext, Resume, ToolResult
from palui.runner.gateway_cap import OVER_CAP
from palui.runner.pending import CallState, PendingCall
from palui.runner.server_questions import SendAgain
from palui.runner.stop_guard import StopRequested

if TYPE_CHECKING:
    from palui.runner.approval_gate import ApprovalGate
    from palui.runner.call_options import CallOptions
    from palui.runner.call_records import CallRecords
    from palui.runner.deps import RunnerDeps
    from palui.runner.server_questions import RoundOutcome, ServerQuestions
    from palui.runner.state import Turn
    from palui.runner.turn_events import TurnEvents
    from palui.store.tools import ToolRow


class CallSender:
    """Sends the calls of one turn.

    Args:
        deps: the connector hub, the database, settings and the person's channel (for the call's context).
        records: what a call leaves behind.
        gate: the re-decision of an approved call.
        questions: a server's questions during the call, put to the person (or a trusted gateway client);
            None: refused.
        events: the turn's events (``tool_start`` goes to the front end only).
        options: the door's: the stop guard the call runs under (``guard``), the seconds left for it
            (``time_left``), the durable ``sent`` marker (``save``), the cap that counts each call sent (``cap``),
            and for a gateway client (``client``) its writes stored untrusted (``CallContext.writer``), the result
            as the server sent it (``result``) and the server's progress (``progress``).
    """

    def __init__(self, deps: RunnerDeps, records: CallRecords, gate: ApprovalGate, questions: ServerQuestions | None,
                 events: TurnEvents, options: CallOptions) -> None:
        self._deps = deps
        self._records = records
        self._gate = gate
        self._questions = questions
        self._guard = options.guard
        self._time_left = options.time_left
        self._events = events
        self._save = options.save
        self._cap = options.cap
        self._writer = f"gateway client {options.client}" if options.client else None
        self._raw = options.result == "wire"
        self._progress = options.progress

    async def send(self, t: Turn, call: PendingCall, row: ToolRow, verdict: str, reason: str,
                   approved: bool = False, resume: Resume | None = None) -> bool:
        """Send the call and record its result. True when the turn pauses because the server asked the
        person questions (2026-07-28); ``resume`` carries the answers when the call is sent again.

        Raises:
            StopRequested, asyncio.CancelledError: the turn was stopped while the call was in flight
                (audited "cancelled; may have run").
        """
        conn = await self._deps.hub.get(row.connector)
        if approved and not self._gate.recheck(t, call, row, verdict):
            return False
        if self._cap is not None and resume is None and (over := self._cap.take()) is not None:
            self._records.refuse(t, call, row, verdict, over, outcome=OVER_CAP)  # reached since the cap step
            return False
        call["state"] = CallState.SENT
        self._save(t)  # durable marker: a crash from here on never re-runs the call
        self._events.live(t, {"type": "tool_start", "tool": row.name, "args": call["args"]})
        ctx = CallContext(
            turn_id=t.id,
            conversation_id=t.conversation_id,
            origin=t.origin,
            tainted=t.tainted,
            taint_source=t.taint_source,
            step=t.steps,
            db=self._deps.db,
            settings=self._deps.settings,
            notifier=self._deps.notify,
            ask=self._questions.asker(t, call, row) if self._questions is not None else None,
            resume=resume,
            tool=row,  # read when the call was decided: the connector need not read it again
            writer=self._writer,
            raw=self._raw,
            progress=self._progress,
        )
        started = time.monotonic()
        try:
            result = await self._guard.run(t.id, conn.call_tool(row.tool, call["args"], ctx),
                                           max(0.1, self._time_left(t)))
        except TimeoutError:
            result = ToolResult("Error: the call ran out of the turn's time budget.", is_error=True)
        except (asyncio.CancelledError, StopRequested):
            self._records.audit(t, call, row, verdict, reason, "cancelled; may have run",
                                (time.monotonic() - started) * 1000)
            call["state"] = CallState.DONE
            self._events.emit(t, {"type": "tool_call", "tool": row.name, "args": call["args"], "verdict": verdict,
                                  "reason": reason, "result": "Stopped while the call was in flight; it may have run.",
                                  "is_error": True, "tainted": t.tainted, "cancelled": True})
            raise
        except Exception as e:  # a connector bug must not crash the turn
            result = ToolResult(f"Error: {type(e).__name__}: {str(e)[:500]}", is_error=True)
        if result.input_required is not None:
            if self._questions is not None:
                return await self._follow(
                    t, call, self._questions.store_round(t, call, row, result.input_required, verdict, reason))
            result = ToolResult("Error: the server asked questions during the call, and no one may answer them "
                                "here.", is_error=True, untrusted=result.untrusted)
        call.pop("elicit", None)
        self._records.returned(t, call, row, result, verdict, reason, approved, (time.monotonic() - started) * 1000)
        return False

    async def resume_elicited(self, t: Turn, call: PendingCall) -> bool:
        """Go on with a call paused on a server's questions. True: still waiting for the person."""
        assert self._questions is not None  # only a door that asks the person pauses a call on questions
        return await self._follow(t, call, self._questions.resume(t, call))

    async def _follow(self, t: Turn, call: PendingCall, outcome: RoundOutcome) -> bool:
        if outcome == "waiting" and self._questions is not None and self._questions.patience is not None:
            outcome = await self._questions.settle(t, call)  # a gateway call cannot pause: it waits here
        if not isinstance(outcome, SendAgain):
            return outcome == "waiting"
        assert self._questions is not None
        try:
            return await self.send(t, call, outcome.row, outcome.verdict, outcome.reason, resume=outcome.resume)
        finally:
            self._questions.mark_sent(outcome)
