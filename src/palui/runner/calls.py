"""Deciding and running the tool calls of one model response, in order (SPEC §3-§5).

Part of :class:`palui.runner.turn.TurnRunner` (a mixin: it uses the runner's ``deps``,
``db``, ``settings``, ``_row``, ``_save``, ``_emit``, ``_time_left`` and ``_guarded``).
Each call is checked against the policy at call time, refused (off, unavailable, not
offered), held for an approval, or executed; its output's taint is recorded, and every
outcome is audited. A server's questions during a call go to the person
(:mod:`palui.runner.eliciting`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic_ai.messages import ModelRequest, ToolReturnPart

from palui.connectors.base import CallContext, Resume, ToolResult
from palui.policy.matrix import decide
from palui.runner import approvals, redecide
from palui.runner import elicitations as questions
from palui.runner import state as st
from palui.runner.eliciting import ElicitMixin
from palui.runner.loops import LoopsMixin
from palui.runner.outside import OutsideMixin
from palui.runner.records import RecordsMixin
from palui.runner.state import Turn
from palui.store.tools import ToolRow
from palui.text.prompts import approval_prompt
from palui.types import NEEDS_TASKS, Origin, Verdict

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.deps import RunnerDeps
    from palui.store.db import Database

T = TypeVar("T")
DENIED = "The person denied this action."
CONNECT_TIMEOUT = 30.0  # seconds to start an MCP connector before a turn gives up on it


class StopRequested(Exception):
    """``/stop`` was asked for this turn (by any process)."""


class CallsMixin(RecordsMixin, ElicitMixin, LoopsMixin, OutsideMixin):
    """The call half of the turn runner. It uses these of :class:`~palui.runner.turn.TurnRunner`:"""

    deps: RunnerDeps
    db: Database
    settings: Settings

    def _row(self, name: str) -> ToolRow | None:
        raise NotImplementedError

    def _emit(self, t: Turn, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _live(self, t: Turn, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _save(self, t: Turn) -> None:
        raise NotImplementedError

    def _time_left(self, t: Turn) -> float:
        raise NotImplementedError

    async def _guarded(self, t: Turn, coro: Awaitable[T], timeout: float) -> T:
        raise NotImplementedError

    @staticmethod
    def _is_builtin(r: ToolRow) -> bool:
        raise NotImplementedError

    async def _process_pending(self, t: Turn) -> bool:
        """Decide and run the held calls in order. True if the turn must pause for an approval."""
        for call in t.pending or []:
            if call["state"] == "done":
                continue
            if st.stop_requested(self.db, t.id):
                raise StopRequested()
            if call["state"] == "sent":
                # The process ended while this call was in flight: never run it twice.
                self._result(t, call, "The call was interrupted before its result arrived; it may have run.", True)
                call["outcome"] = "failed"
                questions.cancel_for_call(self.db, t.id, call["id"], "the process ended while the question waited")
                self._audit(t, call, self._row(call["tool"]), "run", "interrupted while in flight",
                            "cancelled; may have run")
                self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": "run",
                               "reason": "interrupted while in flight", "result": call["result"], "is_error": True,
                               "tainted": t.tainted, "cancelled": True})
                continue
            if call["state"] == "eliciting":  # a 2026-07-28 call waiting for the person's answers
                if await self._resume_elicited(t, call):
                    return True
                continue
            if self._time_left(t) <= 0 and (call["state"] != "asked" or
                                            approvals.status(self.db, call["approval"]) == "approved"):
                # SPEC §6 / issue 10 §5: after the time budget is spent, no call reaches a connector.
                self._not_dispatched(t, call)
                continue
            if why := self._loop_reason(t, call):
                self._not_run(t, call, why)  # issue 15 §3: a looping turn ends; the model is not asked again
                continue
            if call["state"] == "asked":
                ok, why = approvals.consume(self.db, call["approval"], call)
                if why == "pending":
                    return True
                row = self._row(call["tool"])
                if not ok and why.startswith("cancelled: "):
                    # Re-decided when it was answered (SPEC §5): the model is told why it did not run.
                    self._refuse(t, call, row, "ask", why.removeprefix("cancelled: "), outcome="cancelled")
                    continue
                if not ok:
                    text = DENIED if why == "approval denied" else f"{DENIED} ({why})"
                    said = approvals.deny_reason(self.db, call["approval"]) if why == "approval denied" else None
                    if said:  # the person's reason goes to the model as the denial (SPEC §8 /deny ID [reason])
                        text = f"{DENIED[:-1]}: {said}"
                    self._result(t, call, text, True)
                    call["outcome"] = "denied"
                    self._audit(
                        t, call, row, "ask", call.get("reason", ""), "denied" if why == "approval denied" else why
                    )
                    self._emit(
                        t,
                        {
                            "type": "tool_call",
                            "tool": call["tool"],
                            "args": call["args"],
                            "verdict": "ask",
                            "reason": call.get("reason", ""),
                            "result": text,
                            "is_error": True,
                            "tainted": t.tainted,
                            "denied": True,
                        },
                    )
                    continue
                if row is None:
                    self._refuse(t, call, None, "unavailable", "the tool no longer exists")
                    continue
                if await self._execute(t, call, row, "ask", call.get("reason", ""), approved=True):
                    return True
                continue
            if await self._decide_and_run(t, call):
                return True
        if not self._loop_stop and self._time_left(t) > 0:  # out of time: the time budget is what ended it
            self._loop_stop = self._streak_reason(t)
        # The outcome tells providers that mark failed results (Anthropic's is_error) which ones failed.
        returns = [
            ToolReturnPart(
                tool_name=c["tool"],
                content=c["result"],
                tool_call_id=c["id"],
                outcome=c.get("outcome") or ("failed" if c.get("is_error") else "success"),
            )
            for c in t.pending or []
        ]
        t.messages.append(ModelRequest(parts=returns))
        t.pending = None
        return False

    async def _decide_and_run(self, t: Turn, call: dict[str, Any]) -> bool:
        row = self._row(call["tool"])
        if row is None or call["tool"] not in (t.offered or []):
            why = self._not_offered_reason(t, row, call["tool"])
            self._refuse(t, call, row, "off" if row is not None and not row.enabled else "unavailable", why)
            return False
        if not self._is_builtin(row):
            try:
                await asyncio.wait_for(
                    self.deps.hub.get(row.connector), timeout=max(1.0, min(CONNECT_TIMEOUT, self._time_left(t)))
                )
            except Exception as e:
                self._refuse(
                    t, call, row, "run", f"connector {row.connector} is not available: {str(e)[:200]}", outcome="error"
                )
                return False
            row = self._row(call["tool"])  # the connection may have flagged it
            if row is None:
                self._refuse(t, call, None, "unavailable", "the tool is no longer listed by its server")
                return False
        d = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source)
        if d.verdict in (Verdict.OFF, Verdict.UNAVAILABLE):
            self._refuse(t, call, row, d.verdict.value, d.reason)
            return False
        if row.needs_tasks:  # issue 14: never offered; a call to it never reaches the server
            self._refuse(t, call, row, "unavailable", f"the tool {NEEDS_TASKS}")
            return False
        if call.get("bad_args"):
            self._result(t, call, f"Error: {call['bad_args']}", True)
            self._audit(t, call, row, d.verdict.value, d.reason, "error: bad arguments")
            return False
        d = self._rule_of_two(t, call, row, d)  # issue 15 §6: a read that reaches outside may ask
        if d.verdict is Verdict.ASK:
            expiry = self.settings.get(
                "approvals.job_expiry_seconds" if t.origin is Origin.JOB else "approvals.chat_expiry_seconds"
            )
            a = approvals.create(
                self.db,
                turn_id=t.id,
                conversation_id=t.conversation_id,
                call=call,
                tool_class=row.tool_class.value,
                class_source=row.class_source.value,
                origin=t.origin.value,
                reason=d.reason,
                expiry_seconds=float(expiry),
                schema=row.input_schema,
            )
            call["state"] = "asked"
            call["approval"] = a["id"]
            call["reason"] = d.reason
            self._audit(t, call, row, "ask", d.reason, "asked")
            self._emit(
                t,
                {
                    "type": "approval",
                    "approval": a["id"],
                    "tool": row.name,
                    "args": call["args"],
                    "class": row.tool_class.value,
                    "class_source": row.class_source.value,
                    "verdict": "ask",
                    "reason": d.reason,
                    "untrusted_args": a["untrusted_args"],
                    "expires_at": a["expires_at"],
                },
            )
            self.deps.notify(
                "approval", approval_prompt(a), turn_id=t.id, conversation_id=t.conversation_id, approval_id=a["id"]
            )
            return True
        return await self._execute(t, call, row, "run", d.reason)

    async def _execute(
        self, t: Turn, call: dict[str, Any], row: ToolRow, verdict: str, reason: str, approved: bool = False,
        resume: Resume | None = None,
    ) -> bool:
        """Send the call and record its result. True when the turn pauses because the server asked the
        person questions (2026-07-28); ``resume`` carries the answers when the call is sent again."""
        conn = await self.deps.hub.get(row.connector)
        if approved:
            # Decided again immediately before the call is sent (SPEC §5): connecting may have flagged it.
            why = redecide.refusal(self.db, call["tool"], t.origin.value, t.tainted, t.taint_source)
            if why:
                redecide.cancel(self.db, call["approval"], why, from_status=("approved",))
                self.deps.notify(
                    "notice",
                    f"Approval {call['approval']} ({call['tool']}) was cancelled: {why}.",
                    turn_id=t.id,
                    conversation_id=t.conversation_id,
                    approval_id=call["approval"],
                )
                self._refuse(t, call, row, verdict, why, outcome="cancelled")
                return False
        call["state"] = "sent"
        self._save(t)  # durable marker: a crash from here on never re-runs the call
        self._live(t, {"type": "tool_start", "tool": row.name, "args": call["args"]})
        ctx = CallContext(
            turn_id=t.id,
            conversation_id=t.conversation_id,
            origin=t.origin,
            tainted=t.tainted,
            taint_source=t.taint_source,
            step=t.steps,
            db=self.db,
            settings=self.settings,
            notifier=self.deps.notify,
            ask=self._asker(t, call, row),
            resume=resume,
        )
        started = time.monotonic()
        try:
            result = await self._guarded(t, conn.call_tool(row.tool, call["args"], ctx), max(0.1, self._time_left(t)))
        except TimeoutError:
            result = ToolResult("Error: the call ran out of the turn's time budget.", is_error=True)
        except (asyncio.CancelledError, StopRequested):
            self._audit(t, call, row, verdict, reason, "cancelled; may have run", (time.monotonic() - started) * 1000)
            call["state"] = "done"
            self._emit(
                t,
                {
                    "type": "tool_call",
                    "tool": row.name,
                    "args": call["args"],
                    "verdict": verdict,
                    "reason": reason,
                    "result": "Stopped while the call was in flight; it may have run.",
                    "is_error": True,
                    "tainted": t.tainted,
                    "cancelled": True,
                },
            )
            raise
        except Exception as e:  # a connector bug must not crash the turn
            result = ToolResult(f"Error: {type(e).__name__}: {str(e)[:500]}", is_error=True)
        if result.input_required is not None:
            return await self._input_required(t, call, row, result.input_required, verdict, reason)
        call.pop("elicit", None)
        duration = (time.monotonic() - started) * 1000
        untrusted = result.untrusted if result.untrusted is not None else row.untrusted_output
        untrusted = bool(untrusted) and not (row.trusted_source or row.connector_trusted)
        newly_tainted = untrusted and not t.tainted
        if untrusted:
            self._taint(
                t, f"{row.name} at step {t.steps}", result.untrusted_texts or [result.text], result.taint_detail,
                announce=False,
            )
        self._result(t, call, result.text, result.is_error)
        outcome = ("approved; " if approved else "") + ("error" if result.is_error else "ok")
        self._audit(t, call, row, verdict, reason, outcome, duration)
        self._emit(
            t,
            {
                "type": "tool_call",
                "tool": row.name,
                "args": call["args"],
                "verdict": verdict,
                "reason": reason,
                "result": result.text[:4000],
                "is_error": result.is_error,
                "tainted": t.tainted,
                "untrusted_output": untrusted,
                "duration_ms": round(duration, 1),
            },
        )
        if newly_tainted:  # after the call's own line: events in the order they happened (issue 12)
            self._emit(t, {"type": "tainted", "source": t.taint_source})
        return False
