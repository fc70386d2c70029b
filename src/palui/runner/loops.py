"""Loops end the turn, not just the tool (issue 15 §3).

Two rules, checked while the calls of a response are decided in order (:mod:`palui.runner.calls`):

- ``budgets.repeat_calls`` (default 3): the same call — the same tool with the same canonical
  arguments (:func:`palui.runner.approvals.args_hash`) — made for the N-th time in one turn, whatever
  the earlier ones returned, is not run;
- ``budgets.error_streak`` (default 4): after N calls in a row were refused, denied or failed (every
  result whose outcome is not ``success``: not offered, off, unavailable, cancelled, denied, expired,
  an error, not dispatched), no further call is run.

Either ends the turn with status ``budget`` and a reason naming the rule; the rest of the response's
calls are answered "not run" and audited, and the model is not asked again. The person is told like
any other budget. ``0`` turns a rule off. The counts come from the turn's own messages, so they hold
across a pause for approval and a resume in another process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from palui.policy.matrix import decide
from palui.runner import approvals

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.state import Turn
    from palui.store.tools import ToolRow


def call_key(tool: str, args: Any) -> str:
    """What makes two calls "the same call": the tool and the hash of its canonical arguments."""
    return f"{tool}\0{approvals.args_hash(args)}"


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


class LoopsMixin:
    """The loop rules of the turn runner (used by :class:`~palui.runner.calls.CallsMixin`)."""

    settings: Settings
    _loop_stop: str | None = None  # set once a rule ended the turn: the reason
    _keys: dict[str, str]

    def _audit(self, t: Turn, call: dict[str, Any], row: ToolRow | None, verdict: str, reason: str, outcome: str,
               duration_ms: float | None = None) -> None:
        raise NotImplementedError

    def _row(self, name: str) -> ToolRow | None:
        raise NotImplementedError

    def _emit(self, t: Turn, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _occurrence(self, t: Turn, call: dict[str, Any]) -> int:
        """How many times this call (tool and arguments) was made in the turn, this one included."""
        if not hasattr(self, "_keys"):
            self._keys = {}
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

    def _outcomes(self, t: Turn) -> list[str]:
        out: list[str] = [p.outcome for m in t.messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]
        out += [c.get("outcome") or ("failed" if c.get("is_error") else "success")
                for c in t.pending or [] if c.get("state") == "done"]
        return out

    def _streak_reason(self, t: Turn) -> str | None:
        limit = int(self.settings.get("budgets.error_streak"))
        if not limit:
            return None
        n = trailing_failures(self._outcomes(t))
        if n < limit:
            return None
        last = next((c["tool"] for c in reversed(t.pending or []) if c.get("state") == "done"), None)
        return (f"budgets.error_streak: {n} calls in a row were refused, denied or failed"
                + (f" (the last: {last})" if last else ""))

    def _loop_reason(self, t: Turn, call: dict[str, Any]) -> str | None:
        """Why this call may not run because the turn is looping, or None. Sets the stop for the turn."""
        if self._loop_stop:
            return self._loop_stop
        why = self._streak_reason(t)
        limit = int(self.settings.get("budgets.repeat_calls"))
        if why is None and limit and call["state"] == "todo":
            n = self._occurrence(t, call)
            if n >= limit:
                why = (f"budgets.repeat_calls: {call['tool']} was called a {_ordinal(n)} time with the same "
                       "arguments in this turn")
        self._loop_stop = why
        return why

    def _not_run(self, t: Turn, call: dict[str, Any], why: str) -> None:
        """Answer a call the loop rules keep from running: never sent, audited, the model told why."""
        row = self._row(call["tool"])
        verdict = "ask" if call.get("state") == "asked" else "unavailable"
        if row is not None and call.get("state") != "asked":
            verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value
        text = f"Error: not run: the turn ends here ({why})."
        call.update(result=text, is_error=True, state="done")
        self._audit(t, call, row, verdict, why, "not run: loop stopped")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted, "not_dispatched": True})
