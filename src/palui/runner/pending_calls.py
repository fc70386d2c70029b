"""Answering the held tool calls of one model response, one by one and in order (spec §3-§5).

:class:`PendingCalls` is held by the runner (:class:`~palui.runner.turn_runner.TurnRunner`) and walks
``Turn.pending`` (:mod:`palui.runner.pending`), handing each call to the collaborator that owns its
next step:

- a call found ``sent`` was in flight when its process ended: answered "may have run", never sent again;
- ``eliciting``: the sender goes on with it once the person answered the server's questions;
- after the time budget, no call reaches a connector (:meth:`CallRecords.not_dispatched`);
- a looping turn ends its tool use: the loop guard answers the rest "not run";
- a call the person denied earlier in the turn is refused as denied before, not asked again
  (:mod:`palui.runner.person_denials`);
- ``asked``: the approval gate gives the person's answer; an approved call is sent;
- ``todo``: the decider decides it again at call time; an ``ask`` is held at the gate (the rest of the
  response waits with it), a ``run`` is sent.

When every call is answered, their results go to the model as one request (the outcome tells
providers that mark failed results, such as Anthropic's ``is_error``, which ones failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic_ai.messages import ModelRequest, ToolReturnPart

from palui.runner import elicitations as questions
from palui.runner import state as st
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, outcome
from palui.runner.stop_guard import StopRequested
from palui.types import Verdict

if TYPE_CHECKING:
    from palui.runner.approval_gate import ApprovalGate
    from palui.runner.call_decider import CallDecider
    from palui.runner.call_records import CallRecords
    from palui.runner.call_sender import CallSender
    from palui.runner.loop_guard import LoopGuard
    from palui.runner.person_denials import PersonDenials
    from palui.runner.state import Turn
    from palui.runner.turn_events import Emit
    from palui.store.db import Database


class PendingCalls:
    """The walk over one turn's held calls.

    Args:
        db: the turn's stop flag, the questions of a call cut off by a crash, the catalog.
        records, gate, loops, denials, decider, sender: the collaborators a call's step belongs to.
        emit: the turn's event sink.
        time_left: the turn's time left in seconds (:meth:`TurnClock.time_left`).
    """

    def __init__(self, db: Database, records: CallRecords, gate: ApprovalGate, loops: LoopGuard,
                 denials: PersonDenials, decider: CallDecider, sender: CallSender, emit: Emit,
                 time_left: Callable[[Turn], float]) -> None:
        self._db = db
        self._records = records
        self._gate = gate
        self._loops = loops
        self._denials = denials
        self._decider = decider
        self._sender = sender
        self._emit = emit
        self._time_left = time_left

    async def process(self, t: Turn) -> bool:
        """Decide and run the held calls in order. True if the turn must pause for the person (an approval
        or a server's questions); otherwise every call is answered, their results are appended to the
        turn's messages and ``t.pending`` is cleared.

        Raises:
            StopRequested: a stop was requested between two calls.
        """
        for call in t.pending or []:
            if call["state"] == CallState.DONE:
                continue
            if st.stop_requested(self._db, t.id):
                raise StopRequested()
            if call["state"] == CallState.SENT:
                self._interrupted(t, call)
                continue
            if call["state"] == CallState.ELICITING:  # a 2026-07-28 call waiting for the person's answers
                if await self._sender.resume_elicited(t, call):
                    return True
                continue
            if self._time_left(t) <= 0 and (call["state"] != CallState.ASKED or self._gate.approved(call)):
                # spec §6: after the time budget is spent, no call reaches a connector.
                self._records.not_dispatched(t, call)
                continue
            if why := self._loops.reason(t, call):
                self._loops.not_run(t, call, why)  # a looping turn's tool use ends
                continue
            if earlier := self._denials.earlier(t, call):
                self._denials.refuse(t, call, earlier)  # spec §6.3: the person is not asked twice
                continue
            if call["state"] == CallState.ASKED:
                answer = self._gate.answer(t, call)
                if answer.held:
                    return True
                if answer.row is not None and await self._sender.send(
                        t, call, answer.row, "ask", call.get("reason", ""), approved=True):
                    return True
                continue
            decided = await self._decider.decide(t, call)
            if decided is None:
                continue
            row, d = decided
            if d.verdict is Verdict.ASK:
                await self._gate.ask(t, call, row, d)
                return True
            if await self._sender.send(t, call, row, "run", d.reason):
                return True
        if not self._loops.stop and self._time_left(t) > 0:  # out of time: the time budget is what ended it
            self._loops.check_streak(t)
        returns = [
            ToolReturnPart(tool_name=c["tool"], content=c["result"], tool_call_id=c["id"], outcome=outcome(c))
            for c in t.pending or []
        ]
        t.messages.append(ModelRequest(parts=returns))
        t.pending = None
        return False

    def _interrupted(self, t: Turn, call: PendingCall) -> None:
        """The process ended while this call was in flight: never run it twice. An approved call keeps its
        ``ask`` verdict, so every surface says it was approved and may have run."""
        verdict = "ask" if call.get("approval") else "run"
        self._records.result(call, "The call was interrupted before its result arrived; it may have run.", True)
        call["outcome"] = "failed"
        questions.cancel_for_call(self._db, t.id, call["id"], "the process ended while the question waited")
        self._records.audit(t, call, usable_tool(self._db, call["tool"]), verdict, "interrupted while in flight",
                            "cancelled; may have run")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": "interrupted while in flight", "result": call["result"], "is_error": True,
                       "tainted": t.tainted, "cancelled": True})
