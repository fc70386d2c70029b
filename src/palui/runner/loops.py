"""Loops end the turn, not just the tool (spec §6.3).

Two rules, checked while the calls of a response are decided in order (:mod:`palui.runner.calls`):

- ``budgets.repeat_calls`` (default 3): the same call — the same tool with the same canonical
  arguments (:func:`palui.runner.approvals.args_hash`, JSON numbers by value: ``5`` is ``5.0``, ``true``
  is not ``1``) — made for the N-th time in one turn, whatever
  the earlier ones returned, is not run;
- ``budgets.error_streak`` (default 4): after N calls in a row were refused, denied or failed (every
  result whose outcome is not ``success``: not offered, off, unavailable, cancelled, denied, expired,
  an error, not dispatched), no further call is run.

Either ends the turn with status ``budget`` and a reason naming the rule; the rest of the response's
calls are answered "not run" and audited, and the model is not asked again. The person is told like
any other budget. ``0`` turns a rule off. The counts come from the turn's own messages, so they hold
across a pause for approval and a resume in another process.

:class:`LoopGuard` is held by the runner; it owns the turn's loop stop (the reason, once a rule ended
the turn), which the pending-calls walk sets and the runner reads before asking the model again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from palui.policy.matrix import decide
from palui.runner import approvals
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, outcome

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.events import Emit
    from palui.runner.records import CallRecords
    from palui.runner.state import Turn
    from palui.store.db import Database


def by_value(value: Any) -> Any:
    """``value`` with every JSON number that is a whole float made an int, so ``5`` and ``5.0`` (the same
    JSON number, RFC 8259 §6) compare equal; booleans stay booleans (``true`` is not ``1``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: by_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [by_value(v) for v in value]
    return value


def call_key(tool: str, args: Any) -> str:
    """What makes two calls "the same call": the tool and the hash of its canonical arguments, numbers
    compared by value (:func:`by_value`)."""
    return f"{tool}\0{approvals.args_hash(by_value(args))}"


def _part_key(p: ToolCallPart) -> str:
    try:
        return call_key(p.tool_name, p.args_as_dict())
    except (ValueError, TypeError):
        return f"{p.tool_name}\0raw:{p.args!r}"


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def trailing_failures(outcomes: list[str]) -> int:
    """How many of the last ``outcomes`` in a row are not ``success``."""
    n = 0
    for o in reversed(outcomes):
        if o == "success":
            break
        n += 1
    return n


class LoopGuard:
    """The loop rules of one run.

    Args:
        db: for the tool as stored now (the verdict a call that is not run is audited with).
        settings: ``budgets.repeat_calls`` and ``budgets.error_streak``, read at each check.
        records: answers and audits a call that is not run.
        emit: the turn's event sink.
    """

    def __init__(self, db: Database, settings: Settings, records: CallRecords, emit: Emit) -> None:
        self._db = db
        self._settings = settings
        self._records = records
        self._emit = emit
        #: Set once a rule ended the turn: its reason (the model is not asked again).
        self.stop: str | None = None
        self._keys: dict[str, str] = {}  # tool call id -> call key, computed once per run

    def _occurrence(self, t: Turn, call: PendingCall) -> int:
        """How many times this call (tool and arguments) was made in the turn, this one included."""
        seen: list[str] = []
        for m in t.messages:
            if not isinstance(m, ModelResponse):
                continue
            for p in m.parts:
                if isinstance(p, ToolCallPart):
                    key = self._keys.get(p.tool_call_id)
                    if key is None:
                        key = self._keys[p.tool_call_id] = _part_key(p)
                    seen.append(key)
                    if p.tool_call_id == call["id"]:
                        return seen.count(key)
        return seen.count(call_key(call["tool"], call["args"])) + 1

    @staticmethod
    def _outcomes(t: Turn) -> list[str]:
        out: list[str] = [p.outcome for m in t.messages if isinstance(m, ModelRequest) for p in m.parts
                          if isinstance(p, ToolReturnPart)]
        out += [outcome(c) for c in t.pending or [] if c.get("state") == CallState.DONE]
        return out

    def streak_reason(self, t: Turn) -> str | None:
        """The error streak's reason when the last ``budgets.error_streak`` outcomes all failed, else None."""
        limit = int(self._settings.get("budgets.error_streak"))
        if not limit:
            return None
        n = trailing_failures(self._outcomes(t))
        if n < limit:
            return None
        last = next((c["tool"] for c in reversed(t.pending or []) if c.get("state") == CallState.DONE), None)
        return (f"budgets.error_streak: {n} calls in a row were refused, denied or failed"
                + (f" (the last: {last})" if last else ""))

    def check_streak(self, t: Turn) -> None:
        """After a response's calls are all answered: the error streak may end the turn."""
        if not self.stop:
            self.stop = self.streak_reason(t)

    def reason(self, t: Turn, call: PendingCall) -> str | None:
        """Why this call may not run because the turn is looping, or None. Sets the stop for the turn."""
        if self.stop:
            return self.stop
        why = self.streak_reason(t)
        limit = int(self._settings.get("budgets.repeat_calls"))
        if why is None and limit and call["state"] == CallState.TODO:
            n = self._occurrence(t, call)
            if n >= limit:
                why = (f"budgets.repeat_calls: {call['tool']} was called a {_ordinal(n)} time with the same "
                       "arguments in this turn")
        self.stop = why
        return why

    def not_run(self, t: Turn, call: PendingCall, why: str) -> None:
        """Answer a call the loop rules keep from running: never sent, audited, the model told why."""
        row = usable_tool(self._db, call["tool"])
        verdict = "ask" if call.get("state") == CallState.ASKED else "unavailable"
        if row is not None and call.get("state") != CallState.ASKED:
            verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value
        text = f"Error: not run: the turn ends here ({why})."
        self._records.result(call, text, True)
        self._records.audit(t, call, row, verdict, why, "not run: loop stopped")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted, "not_dispatched": True})
