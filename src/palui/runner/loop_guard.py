"""Loops end the turn's tool use, not just the tool (spec §6.3).

Three rules, checked while the calls of a response are decided in order (:mod:`palui.runner.pending_calls`):

- ``budgets.repeat_calls`` (default 3): the same call — the same tool with the same canonical
  arguments (:func:`palui.runner.pending.args_hash`, JSON numbers by value: ``5`` is ``5.0``, ``true``
  is not ``1``) — made for the N-th time in one turn is not run (a call the person denied is refused as
  denied before instead, :mod:`palui.runner.person_denials`, and never trips this rule). A ``read`` whose N-1
  earlier results were all identical is answered with that result at its N-th time instead (:meth:`again`: not
  sent, the model told), and its (N+1)-th call ends the tool use: an injected call that repeats the task's read
  does not cost the task, and a model looping on one read still stops. A gateway client's reads are not counted
  at all (``read_repeats`` ``uncounted``, spec §8.6);
- ``budgets.error_streak`` (default 4): after N calls in a row were refused or failed (every result
  whose outcome is not ``success``: not offered, off, unavailable, cancelled, denied before, an error,
  not dispatched), no further call is run. The person's own denials are their decisions, not failures:
  they neither count nor break a streak;
- ``budgets.denials`` (default 8): once the person denied more than N of the turn's calls, no further
  call is run.

Each ends the turn's tool use with a reason naming the rule; the rest of the response's calls are
answered "not run" and audited, and the model gets one last step without tools to answer the person
(:mod:`palui.runner.last_step`); the turn ends with status ``budget``. ``0`` turns a rule off. The counts
come from a :class:`~palui.runner.call_history.CallHistory`: a turn's own messages (and its approvals, for
the person's denials), so they hold across a pause for approval and a resume in another process; or a
gateway client's calls of every session, until the person clears the client (spec §8.6), whose stop then
refuses every later call of the client.

:class:`LoopGuard` is held by the governed call (:mod:`palui.runner.governed_call`); the loop stop (the
reason, once a rule ended the tool use) is its history's, which the runner reads before asking the model
again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from palui.policy.matrix import decide
from palui.runner.call_history import Earlier
from palui.runner.call_history import by_value as by_value
from palui.runner.call_history import call_key as call_key
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall
from palui.runner.person_denials import STOPPED_BY_PERSON
from palui.types import ToolClass

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.call_history import CallHistory
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.runner.turn_events import Emit
    from palui.store.db import Database


#: The audit outcome of a repeated read answered with its earlier result (spec §6.3).
REPEATED = "not sent: same result as before"


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
    """The person's denials of the calls the rules count
    (:class:`palui.runner.person_denials.PersonDenials`)."""

    def ids(self, t: Turn) -> set[str]:
        """The tool call ids of the calls the person denied."""

    def earlier(self, t: Turn, call: PendingCall) -> object | None:
        """The person's earlier denial of this same call, or None."""

    def stopped(self, t: Turn, but: str | None = None) -> bool:
        """Whether the person answered a call (but the approval ``but``) "deny and stop" (spec §5.10)."""


class LoopGuard:
    """The loop rules of one door's calls.

    Args:
        db: for the tool as stored now (the verdict a call that is not run is audited with).
        settings: ``budgets.repeat_calls``, ``budgets.error_streak`` and ``budgets.denials``, read at each check.
        records: answers and audits a call that is not run.
        emit: the event sink.
        denials: the person's denials of the counted calls.
        history: the counted calls and where the stop is kept (a turn's, or a gateway client's).
        whose: the words for whose tool calls end (``this turn's``, ``this client's``).
    """

    def __init__(self, db: Database, settings: Settings, records: CallRecords, emit: Emit,
                 denials: Denials, history: CallHistory, whose: str = "this turn's",
                 read_repeats: str = "earlier") -> None:
        self._db = db
        self._settings = settings
        self._records = records
        self._emit = emit
        self._denials = denials
        self.history = history
        self._whose = whose
        self._read_repeats = read_repeats

    @property
    def stop(self) -> str | None:
        """Set once a rule ended the tool use: its reason (the model is not asked again)."""
        return self.history.stop

    def streak_reason(self, t: Turn, call: PendingCall | None = None) -> str | None:
        """Why the tool use ends now, or None: the person answered a call "deny and stop", the last
        ``budgets.error_streak`` calls (the person's denials left out) were refused or failed, or the person denied
        more than ``budgets.denials`` calls. ``call``: the call being decided (its own "deny and stop" answer is
        not a stop for it)."""
        if self._denials.stopped(t, call.get("approval") if call is not None else None):
            return STOPPED_BY_PERSON  # "deny and stop" (spec §5.10): the person's own stop, whatever the budgets
        streak, most = self._settings.budgets.error_streak, self._settings.budgets.denials
        if not streak and not most:
            return None
        denied = self._denials.ids(t)
        answered = self.history.answered(t, streak + len(denied) + 1)
        theirs = [a for a in answered if a[0] not in denied]  # the person's denials are their decisions
        n = trailing_failures([o for _id, _tool, o in theirs])
        if streak and n >= streak:
            return f"budgets.error_streak: {n} calls in a row were refused or failed (the last: {theirs[-1][1]})"
        said_no = self.history.denied(t, denied)
        if most and said_no > most:
            where = "in this turn" if self._whose == "this turn's" else "of this client"
            return f"budgets.denials: the person denied {said_no} calls {where}, more than {most}"
        return None

    def check_streak(self, t: Turn) -> None:
        """After a response's calls are all answered: the error streak or the denials may end the turn."""
        if not self.history.stop:
            self.history.stop = self.streak_reason(t)

    def reason(self, t: Turn, call: PendingCall) -> str | None:
        """Why this call may not run because the calls are looping, or None. Sets the stop. A call the person
        denied before is left to :meth:`PersonDenials.refuse` (it never counts as a repeat), and so is a call
        that waits on or consumes its approval (``asked``: not a repeat)."""
        if self.history.stop:
            return self.history.stop
        why = self.streak_reason(t, call)  # the call the person stopped at is answered with their denial
        limit = self._settings.budgets.repeat_calls
        if why is None and limit and call["state"] == CallState.TODO and self._denials.earlier(t, call) is None \
                and not (self._read_repeats == "uncounted" and self._reads(call)):
            n = self.history.occurrence(t, call)
            if n >= limit:
                where = "in this turn" if self._whose == "this turn's" else "by this client"
                why = (f"budgets.repeat_calls: {call['tool']} was called a {_ordinal(n)} time with the same "
                       f"arguments {where}")
        self.history.stop = why
        return why

    def _reads(self, call: PendingCall) -> bool:
        """Whether the call's tool is a ``read`` now (its effective class)."""
        row = usable_tool(self._db, call["tool"])
        return row is not None and row.tool_class is ToolClass.READ

    def again(self, t: Turn, call: PendingCall) -> Earlier | None:
        """The earlier result to answer this call with, or None (spec §6.3): a ``read`` made the N-th time
        (``budgets.repeat_calls``) whose N-1 earlier results were all identical is not sent again but answered
        with that result, and does not end the tool use; the (N+1)-th does (:meth:`reason`). A door whose reads
        are not counted (``uncounted``, a gateway client) has none."""
        limit = self._settings.budgets.repeat_calls
        if (self._read_repeats != "earlier" or not limit or call["state"] != CallState.TODO or self.history.stop
                or self.streak_reason(t, call) or self._denials.earlier(t, call) is not None):
            return None
        if self.history.occurrence(t, call) != limit or not self._reads(call):
            return None
        earlier = self.history.results(t, call)
        if len(earlier) != limit - 1 or len({(e.text, e.is_error) for e in earlier}) != 1:
            return None
        return earlier[-1]

    def answer_again(self, t: Turn, call: PendingCall, earlier: Earlier) -> None:
        """Answer a repeated read with its earlier result: never sent, audited, the model told it repeated itself."""
        row = usable_tool(self._db, call["tool"])
        verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value \
            if row is not None else "run"
        n = self._settings.budgets.repeat_calls
        why = (f"budgets.repeat_calls: {call['tool']} was called a {_ordinal(n)} time with the same arguments and "
               f"its results were identical: answered with the result of step {earlier.step}, not sent again")
        text = (f"[Palui: this is the {_ordinal(n)} identical call and the earlier ones all returned this (the last "
                f"at step {earlier.step}), so it was not sent again. One more identical call ends {self._whose} tool "
                "calls.]\n" + earlier.text)
        self._records.result(call, text, earlier.is_error)
        self._records.audit(t, call, row, verdict, why, REPEATED)
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": why, "result": text[:4000], "is_error": earlier.is_error, "tainted": t.tainted})

    def not_run(self, t: Turn, call: PendingCall, why: str) -> None:
        """Answer a call the loop rules keep from running: never sent, audited, the caller told why."""
        row = usable_tool(self._db, call["tool"])
        verdict = "ask" if call.get("state") == CallState.ASKED else "unavailable"
        if row is not None and call.get("state") != CallState.ASKED:
            verdict = decide(row.tool_class, row.enabled, t.origin, t.tainted, t.taint_source).verdict.value
        text = f"Error: not run: {self._whose} tool calls end here ({why})."
        self._records.result(call, text, True)
        self._records.audit(t, call, row, verdict, why, "not run: loop stopped")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": verdict,
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted, "not_dispatched": True})
