"""What a tool call leaves behind (SPEC §3-§5, §10): its result as the model sees it, its audit row,
its event, the taint its output brings, and the sentence a refusal of a tool not offered reads.

Part of :class:`palui.runner.turn.TurnRunner` through :class:`~palui.runner.calls.CallsMixin`
(it uses the runner's ``deps``, ``db``, ``settings``, ``_row`` and ``_emit``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from palui.policy.matrix import decide
from palui.runner import approvals, audit
from palui.runner.state import Turn
from palui.store.tools import ToolRow
from palui.types import NEEDS_TASKS

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.deps import RunnerDeps
    from palui.store.db import Database

MAX_UNTRUSTED_CHARS = 1_000_000  # characters of one untrusted output kept for approval marking


def left_out_by_budget(t: Turn, name: str, budget: int) -> bool:
    """Whether the tool ``name``, on and allowed at the turn's start, was left out of the offered set by
    ``budgets.tools`` (SPEC §6). The turn's ``tools_left_out`` event says so; a turn stored before that
    event existed counts an offered set as full as the budget."""
    for e in t.events:
        if e.get("type") == "tools_left_out":
            return name in (e.get("tools") or [])
    return len(t.offered or []) >= budget


class RecordsMixin:
    """Results, refusals, audit rows and taint of calls. First among the call mixins' bases: the others
    declare ``_audit`` as a stub for their type checks, which this one must come before."""

    deps: RunnerDeps
    db: Database
    settings: Settings

    def _row(self, name: str) -> ToolRow | None:
        raise NotImplementedError

    def _emit(self, t: Turn, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _not_offered_reason(self, t: Turn, row: ToolRow | None, name: str) -> str:
        """Why a call to a tool that was not offered this turn is refused, as one sentence with the fix
        (SPEC §3; issue 12: a switched-on tool left out by the tool budget says so)."""
        if row is None:
            return "no tool has this name"
        d = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source)
        if not d.offered:
            return d.reason
        if row.needs_tasks:
            return f"the tool {NEEDS_TASKS}"
        scope = self.deps.job_connectors(t.job_id) if t.job_id else None
        if scope is not None and row.connector not in scope:  # issue 15 §7: cut before ranking
            return f"this job is limited to the connectors {', '.join(scope)}"
        failed = [e for e in t.events if e.get("type") == "connector_error" and e.get("connector") == row.connector]
        if failed:  # it did not start this turn (a sign-in needed, a server that failed): not offered
            return f"its connector {row.connector} is not available: {failed[-1].get('error', '')}".rstrip(": ")
        budget = int(self.settings.get("budgets.tools"))
        if left_out_by_budget(t, name, budget):
            return f"left out by budgets.tools ({budget}): raise it or switch tools off"
        return "it was switched on or reclassed after this turn started: it is offered from the next turn"

    def _not_dispatched(self, t: Turn, call: dict[str, Any]) -> None:
        """Answer a call the time budget left no room for: never sent, audited as not dispatched."""
        row = self._row(call["tool"])
        verdict = "ask" if call["state"] == "asked" else "run"
        if row is not None and call["state"] != "asked":
            verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value
        text = "Error: not run: the turn's time budget ran out."
        self._result(t, call, text, True)
        self._audit(t, call, row, verdict, "not dispatched: the turn's time budget ran out", "not run: time budget")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": "the turn's time budget ran out", "result": text, "is_error": True,
                       "tainted": t.tainted, "not_dispatched": True})

    def _refuse(
        self, t: Turn, call: dict[str, Any], row: ToolRow | None, verdict: str, reason: str, outcome: str = "refused"
    ) -> None:
        if outcome == "cancelled":
            text = f"Error: the call was not run: {reason}."
        else:
            text = f"Error: the tool {call['tool']!r} cannot be called: {reason}."
        self._result(t, call, text, True)
        self._audit(t, call, row, verdict, reason, outcome)
        self._emit(
            t,
            {
                "type": "tool_call",
                "tool": call["tool"],
                "args": call["args"],
                "verdict": verdict,
                "reason": reason,
                "result": call["result"],
                "is_error": True,
                "tainted": t.tainted,
            },
        )

    def _result(self, t: Turn, call: dict[str, Any], text: str, is_error: bool) -> None:
        call["result"] = text
        call["is_error"] = is_error
        call["state"] = "done"

    def _taint(self, t: Turn, source: str, texts: list[str], detail: str | None, announce: bool = True) -> None:
        if not t.tainted:
            t.tainted = True
            t.taint_source = source + (f", {detail}" if detail else "")  # one sentence: no nested parentheses
            if announce:
                self._emit(t, {"type": "tainted", "source": t.taint_source})
        with self.db.write() as c:
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

    def _audit(
        self,
        t: Turn,
        call: dict[str, Any],
        row: ToolRow | None,
        verdict: str,
        reason: str,
        outcome: str,
        duration_ms: float | None = None,
    ) -> None:
        audit.record(
            self.db,
            turn_id=t.id,
            tool=call["tool"],
            tool_class=row.tool_class.value if row else None,
            class_source=row.class_source.value if row else None,
            origin=t.origin.value,
            tainted=t.tainted,
            verdict=verdict,
            reason=reason,
            args_hash=approvals.args_hash(call["args"]),
            outcome=outcome,
            duration_ms=duration_ms,
        )
