"""What a tool call leaves behind (spec §3-§5, §10): its result as the model sees it, its audit row,
its event, the taint its output brings, and the sentence a refusal of a tool not offered reads.

:class:`CallRecords` is held by the runner and given to every call collaborator that answers a
call (the decider, the approval gate, the sender, the loop guard, the server-questions desk). It
keeps no state of its own: the call's fields, the turn's taint and the database are what it writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from palui.connectors.base import ToolResult
from palui.policy.matrix import decide
from palui.runner import audit
from palui.runner import elicitations as questions
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, args_hash
from palui.runner.state import Turn
from palui.store.tools import ToolRow
from palui.types import NEEDS_TASKS

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.results.events import ToolCallFields
    from palui.runner.turn_events import Emit
    from palui.store.db import Database

MAX_UNTRUSTED_CHARS = 1_000_000  # characters of one untrusted output kept for approval marking


def left_out_by_budget(t: Turn, name: str, budget: int) -> bool:
    """Whether the tool ``name``, on and allowed at the turn's start, was left out of the offered set by
    ``budgets.tools`` (spec §6). The turn's ``tools_left_out`` event says so; a turn stored before that
    event existed counts an offered set as full as the budget."""
    for e in t.events:
        if e["type"] == "tools_left_out":
            return name in (e.get("tools") or [])
    return len(t.offered or []) >= budget


class CallRecords:
    """Results, refusals, audit rows and taint of calls.

    Args:
        db: where audit rows and untrusted content go.
        settings: for ``budgets.tools`` (a refusal's reason).
        job_connectors: the connectors a job is limited to (``RunnerDeps.job_connectors``).
        emit: the turn's event sink (:meth:`palui.runner.turn_events.TurnEvents.emit`).
        client, session: a gateway client's name and session: every audit row carries them in columns of their
            own (spec §8.6; the row's turn is the session's).
        wire: keep a sent call's result as its server sent it on the call (``call["wire"]``, a gateway call's:
            its door takes it off before the call is stored).
    """

    def __init__(self, db: Database, settings: Settings, job_connectors: Callable[[str | None], list[str] | None],
                 emit: Emit, client: str | None = None, session: str | None = None, wire: bool = False) -> None:
        self._db = db
        self._settings = settings
        self._job_connectors = job_connectors
        self._emit = emit
        self._client = client
        self._session = session
        self._wire = wire

    def not_offered_reason(self, t: Turn, row: ToolRow | None, name: str) -> str:
        """Why a call to a tool that was not offered this turn is refused, as one sentence with the fix
        (spec §3; a switched-on tool left out by the tool budget says so)."""
        if row is None:
            return "no tool has this name"
        d = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source)
        if not d.offered:
            return d.reason
        if row.needs_tasks:
            return f"the tool {NEEDS_TASKS}"
        scope = self._job_connectors(t.job_id) if t.job_id else None
        if scope is not None and row.connector not in scope:  # a job's connector scope: cut before ranking
            return f"this job is limited to the connectors {', '.join(scope)}"
        failed = [e for e in t.events if e.get("type") == "connector_error" and e.get("connector") == row.connector]
        if failed:  # it did not start this turn (a sign-in needed, a server that failed): not offered
            return f"its connector {row.connector} is not available: {failed[-1].get('error', '')}".rstrip(": ")
        budget = self._settings.budgets.tools
        if left_out_by_budget(t, name, budget):
            return f"left out by budgets.tools ({budget}): raise it or switch tools off"
        return "it was switched on or reclassed after this turn started: it is offered from the next turn"

    def not_dispatched(self, t: Turn, call: PendingCall) -> None:
        """Answer a call the time budget left no room for: never sent, audited as not dispatched."""
        row = usable_tool(self._db, call["tool"])
        verdict = "ask" if call["state"] == CallState.ASKED else "run"
        if row is not None and call["state"] != CallState.ASKED:
            verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value
        text = "Error: not run: the turn's time budget ran out."
        self.result(call, text, True)
        self.audit(t, call, row, verdict, "not dispatched: the turn's time budget ran out", "not run: time budget")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": "the turn's time budget ran out", "result": text, "is_error": True,
                       "tainted": t.tainted, "not_dispatched": True})

    def interrupted(self, t: Turn, call: PendingCall) -> None:
        """The process ended while this call was in flight (found ``sent``): it is never run twice. An approved
        call keeps its ``ask`` verdict, so every surface says it was approved and may have run."""
        verdict = "ask" if call.get("approval") else "run"
        self.result(call, "The call was interrupted before its result arrived; it may have run.", True)
        call["outcome"] = "failed"
        questions.cancel_for_call(self._db, t.id, call["id"], "the process ended while the question waited")
        self.audit(t, call, usable_tool(self._db, call["tool"]), verdict, "interrupted while in flight",
                   "cancelled; may have run")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": "interrupted while in flight", "result": call["result"], "is_error": True,
                       "tainted": t.tainted, "cancelled": True})

    def refuse(
        self, t: Turn, call: PendingCall, row: ToolRow | None, verdict: str, reason: str, outcome: str = "refused"
    ) -> None:
        """Answer a call that is not sent (``outcome`` ``refused``, ``error`` or ``cancelled``), audit it and say so."""
        if outcome == "cancelled":
            text = f"Error: the call was not run: {reason}."
        else:
            text = f"Error: the tool {call['tool']!r} cannot be called: {reason}."
        self.result(call, text, True)
        self.audit(t, call, row, verdict, reason, outcome)
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": reason, "result": text, "is_error": True, "tainted": t.tainted})

    @staticmethod
    def result(call: PendingCall, text: str, is_error: bool) -> None:
        """The call is answered with ``text``: it is done."""
        call["result"] = text
        call["is_error"] = is_error
        call["state"] = CallState.DONE

    def returned(self, t: Turn, call: PendingCall, row: ToolRow, result: ToolResult, verdict: str, reason: str,
                 approved: bool, duration_ms: float) -> None:
        """Record what a sent call returned: its taint (spec §4: the tool's or the result's own, unless
        the tool or its connector is a trusted source), its result, audit row and ``tool_call`` event,
        then ``tainted`` when this call tainted the turn (events in the order they happened)."""
        untrusted = result.untrusted if result.untrusted is not None else row.untrusted_output
        untrusted = bool(untrusted) and not (row.trusted_source or row.connector_trusted)
        newly_tainted = untrusted and not t.tainted
        if untrusted:
            self.taint(t, f"{row.name} at step {t.steps}", result.untrusted_texts or [result.text], result.taint_detail)
        self.result(call, result.text, result.is_error)
        if self._wire and result.wire is not None:
            call["wire"] = result.wire
        if result.may_have_run:  # its server was lost after the call went out (spec §7.10): the words of §5.7
            outcome = "cancelled; may have run"
        else:
            outcome = ("approved; " if approved else "") + ("error" if result.is_error else "ok")
        self.audit(t, call, row, verdict, reason, outcome, duration_ms)
        event: ToolCallFields = {"type": "tool_call", "tool": row.name, "args": call["args"], "verdict": verdict,
                                 "reason": reason, "result": result.text[:4000], "is_error": result.is_error,
                                 "tainted": t.tainted, "untrusted_output": untrusted,
                                 "duration_ms": round(duration_ms, 1)}
        if result.may_have_run:
            event["cancelled"] = True
        self._emit(t, event)
        if newly_tainted:
            self._emit(t, {"type": "tainted", "source": t.taint_source})
        if result.connector_down:
            self.connector_down(t, row.connector, result.connector_down)

    def connector_down(self, t: Turn, connector: str, why: str) -> None:
        """The connector, not the tool, failed a call (it did not start, its connection closed, it restarted
        mid-call): a ``connector_error`` event, which an unattended result's health line reads (spec §8.4)."""
        self._emit(t, {"type": "connector_error", "connector": connector,
                       "error": why.splitlines()[0][:300] if why else "unavailable"})

    def taint(self, t: Turn, source: str, texts: list[str], detail: str | None) -> None:
        """Mark the turn and its conversation tainted by ``source`` (the first source is kept) and store the
        untrusted ``texts`` (each cut to :data:`MAX_UNTRUSTED_CHARS`) for marking approval arguments (spec §4).
        The ``tainted`` event is the caller's: it follows the event of the call that brought the taint."""
        if not t.tainted:
            t.tainted = True
            t.taint_source = source + (f", {detail}" if detail else "")  # one sentence: no nested parentheses
        with self._db.write() as c:
            for text in texts:
                c.execute(
                    "INSERT INTO untrusted_content (conversation_id, turn_id, source, text, created_at)"
                    " VALUES (?,?,?,?,?)",
                    (t.conversation_id, t.id, source, text[:MAX_UNTRUSTED_CHARS], time.time()),
                )
            c.execute(
                "UPDATE conversations SET tainted = 1, taint_source = COALESCE(taint_source, ?) WHERE id = ?",
                (t.taint_source, t.conversation_id),
            )

    def audit(self, t: Turn, call: PendingCall, row: ToolRow | None, verdict: str, reason: str, outcome: str,
              duration_ms: float | None = None) -> None:
        """One audit row for ``call`` (spec §10): ``row`` None when the tool is gone (no class)."""
        audit.record(
            self._db,
            turn_id=t.id,
            tool=call["tool"],
            tool_class=row.tool_class.value if row else None,
            class_source=row.class_source.value if row else None,
            origin=t.origin.value,
            tainted=t.tainted,
            verdict=verdict,
            reason=reason,
            args_hash=args_hash(call["args"]),
            outcome=outcome,
            duration_ms=duration_ms,
            client=self._client,
            session=self._session,
        )
