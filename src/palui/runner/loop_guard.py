"""Loops end the turn's tool use, not just the tool (spec §6.3).

Three rules, checked while the calls of a response are decided in order (:mod:`palui.runner.pending_calls`):

- ``budgets.repeat_calls`` (default 3): the same call — the same tool with the same canonical
  arguments (:func:`palui.runner.pending.args_hash`, JSON numbers by value: ``5`` is ``5.0``, ``true``
  is not ``1``) — made for the N-th time in one turn, whatever the earlier ones returned, is not run (a
  call the person denied is refused as denied before instead, :mod:`palui.runner.person_denials`, and never
  trips this rule);
- ``budgets.error_streak`` (default 4): after N calls in a row were refused or failed (every result
  whose outcome is not ``success``: not offered, off, unavailable, cancelled, denied before, an error,
  not dispatched), no further call is run. The person's own denials are their decisions, not failures:
  they neither count nor break a streak;
- ``budgets.denials`` (default 8): once the person denied more than N of the turn's calls, no further
  call is run.

Each ends the turn's tool use with a reason naming the rule; the rest of the response's calls are
answered "not run" and audited, and the model gets one last step without tools to answer the person
(:mod:`palui.runner.last_step`); the turn ends with status ``budget``. ``0`` turns a rule off. The counts
come from the turn's own messages (and its approvals, for the person's denials), so they hold across
a pause for approval and a resume in another process.

:class:`LoopGuard` is held by the runner; it owns the turn's loop stop (the reason, once a rule ended
the turn's tool use), which the pending-calls walk sets and the runner reads before asking the model again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from palui.policy.matrix import decide
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, args_hash, outcome

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.runner.turn_events import Emit
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
    return f"{tool}\0{args_hash(by_value(args))}"


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


class Denials(Protocol):
    """The person's denials of a turn's calls, as the loop rules read them
    (:class:`palui.runner.person_denials.PersonDenials`)."""

    def ids(self, t: Turn) -> set[str]:
        """The tool call ids of the turn's calls the person denied."""

    def earlier(self, t: Turn, call: PendingCall) -> object | None:
        """The person's earlier denial of this same call in the turn, or None."""


#: An answered call of the turn: its tool call id, its tool and its outcome (:func:`palui.runner.pending.outcome`).
Answered = tuple[str, str, str]


class LoopGuard:
    """The loop rules of one run.

    Args:
        db: for the tool as stored now (the verdict a call that is not run is audited with).
        settings: ``budgets.repeat_calls``, ``budgets.error_streak`` and ``budgets.denials``, read at each check.
        records: answers and audits a call that is not run.
        emit: the turn's event sink.
        denials: the person's denials of the turn's calls.
    """

    def __init__(self, db: Database, settings: Settings, records: CallRecords, emit: Emit,
                 denials: Denials) -> None:
        self._db = db
        self._settings = settings
        self._records = records
        self._emit = emit
        self._denials = denials
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
    def _answered(t: Turn) -> list[Answered]:
        """The turn's answered calls in order: those of its messages, then the done ones of the response."""
        out: list[Answered] = [(p.tool_call_id, p.tool_name, p.outcome) for m in t.messages
                               if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)]
        out += [(c["id"], c["tool"], outcome(c)) for c in t.pending or [] if c.get("state") == CallState.DONE]
        return out

    def streak_reason(self, t: Turn) -> str | None:
        """Why the turn's tool use ends now, or None: the last ``budgets.error_streak`` calls (the person's
        denials left out) were refused or failed, or the person denied more than ``budgets.denials`` calls."""
        streak, most = self._settings.budgets.error_streak, self._settings.budgets.denials
        if not streak and not most:
            return None
        answered = self._answered(t)
        denied = self._denials.ids(t)
        theirs = [a for a in answered if a[0] not in denied]  # the person's denials are their decisions
        n = trailing_failures([o for _id, _tool, o in theirs])
        if streak and n >= streak:
            return f"budgets.error_streak: {n} calls in a row were refused or failed (the last: {theirs[-1][1]})"
        said_no = sum(1 for tid, _tool, _o in answered if tid in denied)
        if most and said_no > most:
            return f"budgets.denials: the person denied {said_no} calls in this turn, more than {most}"
        return None

    def check_streak(self, t: Turn) -> None:
        """After a response's calls are all answered: the error streak or the denials may end the turn."""
        if not self.stop:
            self.stop = self.streak_reason(t)

    def reason(self, t: Turn, call: PendingCall) -> str | None:
        """Why this call may not run because the turn is looping, or None. Sets the stop for the turn.
        A call the person denied before is left to :meth:`PersonDenials.refuse` (it never counts as a repeat)."""
        if self.stop:
            return self.stop
        why = self.streak_reason(t)
        limit = self._settings.budgets.repeat_calls
        if why is None and limit and call["state"] == CallState.TODO and self._denials.earlier(t, call) is None:
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
        text = f"Error: not run: this turn's tool calls end here ({why})."
        self._records.result(call, text, True)
        self._records.audit(t, call, row, verdict, why, "not run: loop stopped")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted, "not_dispatched": True})
