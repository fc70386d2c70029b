"""The approval gate of a turn's calls (spec §5): asking the person, the answer on resume, and the
re-decision just before an approved call is sent.

A call whose verdict is ``ask`` is held: :meth:`ApprovalGate.ask` stores a durable approval
(:mod:`palui.runner.approvals`) bound to the call's id and argument hash, marks the call ``asked``
and tells the person; the turn pauses, and the calls after it in the response wait with it (the
pending-calls walk stops there). When the turn resumes, :meth:`ApprovalGate.answer` consumes the
approval once: still pending (the turn stays paused), denied, expired, cancelled by a re-decision,
or approved. An approved call is decided again right before it is sent (:meth:`ApprovalGate.recheck`):
connecting may have flagged its tool.

A gateway call (spec §8.6) is not paused: :meth:`ApprovalGate.wait` polls its approval for up to
``gateway.wait_seconds`` and the call goes on when it is answered; not answered in time, or its client gone, the
approval stays and runs nothing by itself: an identical later call of the client, in any of its sessions, waits
on or consumes that same approval until it expires (:meth:`ApprovalGate.retried`).

Held by the governed call (:mod:`palui.runner.governed_call`); it keeps no state of its own (the approval is
in the database, its id on the call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from palui.runner import approvals, caps
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, args_hash
from palui.store import redecide, standing
from palui.text.prompts import approval_prompt
from palui.text.when import stamped
from palui.types import ApprovalStatus, Decision

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.connectors.base import PersonChannel
    from palui.results import UntrustedArg
    from palui.runner.call_options import Progress
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.runner.turn_events import Emit
    from palui.store.db import Database
    from palui.store.tools import ToolRow

DENIED = "The person denied this action."
#: What the model is told, and the audit outcome, when the person answered "deny and stop" (spec §5.10).
STOPPED = "The person denied this action and stopped your tool use: no further tool call will run."
STOPPED_OUTCOME = "denied; tool use stopped by the person"
#: What a call is told whose approval an identical call consumed first (an approval runs one call, spec §5.4).
REPLAYED = ("Error: not run: approval {aid} was already used by an identical call (an approval runs one call); "
            "call again to be asked anew.")
#: How often a waiting call looks at its approval, and tells its caller the progress, in seconds.
POLL_SECONDS = 0.2
PROGRESS_SECONDS = 1.0


@dataclass(frozen=True)
class Answer:
    """What the person's answer means for a held call: ``held`` while there is none yet (the turn stays
    paused); else ``row``, the tool to send the call to when it was approved, or None when the call was
    answered here (denied, expired, cancelled, the tool gone); ``stop``: the person answered "deny and stop"
    (spec §5.10), which ends the tool use."""

    held: bool = False
    row: ToolRow | None = None
    stop: bool = False


class ApprovalGate:
    """Approvals of one turn's calls.

    Args:
        db: the approvals and the catalog.
        settings: the approval expiry of each origin (``approvals.*_expiry_seconds``).
        notify: the person's channel (the request, a cancellation).
        records: answers and audits a call that is not sent.
        emit: the turn's event sink.
    """

    def __init__(self, db: Database, settings: Settings, notify: PersonChannel, records: CallRecords,
                 emit: Emit) -> None:
        self._db = db
        self._settings = settings
        self._notify = notify
        self._records = records
        self._emit = emit

    async def marks(self, t: Turn, call: PendingCall, row: ToolRow) -> list[UntrustedArg]:
        """The marks of an asked call's arguments (spec §4.6), found in a worker thread: a megabyte argument takes
        seconds of CPU, and the service's other turns go on meanwhile. The approval shows them; a standing approval
        never answers a call that has one (spec §5.9)."""
        untrusted, own = approvals.marking_inputs(self._db, t.conversation_id)
        if not untrusted:
            return []
        return await asyncio.to_thread(approvals.marks_for, call["args"], untrusted, own, row.input_schema,
                                       call["tool"])

    async def ask(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision,
                  marks: list[UntrustedArg] | None = None) -> None:
        """Hold ``call`` for the person's approval (``d`` is its ``ask`` decision, ``marks`` its marks, found here
        when None): stored, audited, told — in one transaction, so the approval never exists without the message
        that asks it (spec §8.3)."""
        if marks is None:
            marks = await self.marks(t, call, row)
        with self._db.write():
            self._ask(t, call, row, d, marks)

    def by_rule(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision, rule_id: str) -> None:
        """Record the ask a standing approval answered in advance (spec §5.9): an approval approved by it
        (``answered_via`` ``rule``), its use counted, audited ``ask: …; approved in advance by rule R``, with no
        card sent. The call then goes on as an approved one (decided again right before it is sent)."""
        reason = f"{d.reason}; approved in advance by rule {rule_id}"
        with self._db.write() as c:
            a = approvals.create(self._db, turn_id=t.id, conversation_id=t.conversation_id, call=call,
                                 tool_class=row.tool_class.value, class_source=row.class_source.value,
                                 origin=t.origin.value, reason=reason, expiry_seconds=self._settings.approvals.expiry(
                                     t.origin), schema=row.input_schema, marks=[])
            c.execute("UPDATE approvals SET status = 'approved', answered_at = ?, answered_via = ?, rule_id = ?"
                      " WHERE id = ?", (time.time(), standing.VIA, rule_id, a["id"]))
            standing.used(self._db, rule_id)
            approvals.consume(self._db, a["id"], call)  # used once, by this call, as an answer is on resume (§5.4)
            call["state"] = CallState.ASKED
            call["approval"] = a["id"]
            call["reason"] = reason
            self._records.audit(t, call, row, "ask", reason, "approved by rule")

    def _ask(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision, marks: list[UntrustedArg]) -> None:
        a = approvals.create(
            self._db,
            turn_id=t.id,
            conversation_id=t.conversation_id,
            call=call,
            tool_class=row.tool_class.value,
            class_source=row.class_source.value,
            origin=t.origin.value,
            reason=d.reason,
            expiry_seconds=self._settings.approvals.expiry(t.origin),
            schema=row.input_schema,
            marks=marks,
        )
        call["state"] = CallState.ASKED
        call["approval"] = a["id"]
        call["reason"] = d.reason
        self._records.audit(t, call, row, "ask", d.reason, "asked")
        self._emit(t, {"type": "approval", "approval": a["id"], "tool": row.name, "args": call["args"],
                       "class": row.tool_class.value, "class_source": row.class_source.value, "verdict": "ask",
                       "reason": d.reason, "untrusted_args": a["untrusted_args"], "expires_at": a["expires_at"]})
        # The message is kept (the inbox, a chat app): its expiry is a time with its date, in caps.timezone.
        until = f"expires {stamped(a['expires_at'], caps.zone(self._settings.caps.timezone))}"
        self._notify("approval", approval_prompt(a, expires=until), turn_id=t.id,
                     conversation_id=t.conversation_id, approval_id=a["id"])

    def retried(self, t: Turn, call: PendingCall) -> bool:
        """A gateway call identical (tool and arguments) to an earlier one of the client, in any of its sessions
        (the turns of its conversation), whose approval has not expired and is still pending, or approved and
        unused: it becomes that call (``asked``, its id and reason), to wait on or consume the approval once
        (spec §8.6: an approval outlives the request that asked it, and runs nothing by itself). False, and
        nothing changed, when there is none."""
        same = self._db.one(
            "SELECT a.id, a.tool_call_id, a.reason FROM approvals a JOIN turns s ON s.id = a.turn_id WHERE"
            " a.args_hash = ? AND a.tool = ? AND s.conversation_id = ? AND a.expires_at > ? AND"
            " (a.status = 'pending' OR (a.status = 'approved' AND a.used = 0)) ORDER BY a.created_at DESC LIMIT 1",
            (args_hash(call["args"]), call["tool"], t.conversation_id, time.time()))
        if same is None:
            return False
        call["id"], call["approval"], call["state"] = same["tool_call_id"], same["id"], CallState.ASKED
        call["reason"] = same["reason"]
        return True

    async def wait(self, t: Turn, call: PendingCall, seconds: float, halted: Callable[[Turn], str | None],
                   progress: Progress | None = None, gone: Callable[[], bool] | None = None) -> bool:
        """Wait up to ``seconds`` while the held call's approval is pending (a gateway call, spec §8.6), telling
        ``progress`` every :data:`PROGRESS_SECONDS`. ``halted`` (the brake, a stop) ends the wait with the
        approval cancelled. ``gone`` says the caller went away (its connection closed): the wait ends and the
        approval stays as it is, for the caller's identical retry. Returns False when the caller went away."""
        aid = call["approval"]
        deadline = time.monotonic() + seconds
        told = 0.0  # when the caller was last told progress (monotonic seconds)
        while approvals.status(self._db, aid) == "pending" and time.monotonic() < deadline:
            if gone is not None and gone():
                return False
            why = halted(t)
            if why:
                redecide.cancel(self._db, aid, why)
                return True
            if progress is not None and time.monotonic() - told >= PROGRESS_SECONDS:
                told = time.monotonic()
                await progress(seconds - max(0.0, deadline - told), seconds,
                               f"waiting for the person to answer approval {aid}")
            await asyncio.sleep(POLL_SECONDS)
        return not (gone is not None and gone())

    def approved(self, call: PendingCall) -> bool:
        """Whether the held call's approval is approved (and not yet used or refused)."""
        return approvals.status(self._db, call["approval"]) == ApprovalStatus.APPROVED.value

    def answer(self, t: Turn, call: PendingCall) -> Answer:
        """Consume the held call's approval (once: a replay is a denial). A denial, an expiry or a
        cancellation answers the call here; the person's own reason for a denial is what the model
        is told (``/deny ID REASON``, spec §8)."""
        ok, why = approvals.consume(self._db, call["approval"], call)
        if why == "pending":
            return Answer(held=True)
        row = usable_tool(self._db, call["tool"])
        if not ok and why.startswith("cancelled: "):
            # Re-decided when it was answered (spec §5): the model is told why it did not run.
            self._records.refuse(t, call, row, "ask", why.removeprefix("cancelled: "), outcome="cancelled")
            return Answer()
        if not ok:
            text = DENIED if why == "approval denied" else f"{DENIED} ({why})"
            said = approvals.deny_reason(self._db, call["approval"]) if why == "approval denied" else None
            stop = why == "approval denied" and approvals.stopped(self._db, call["approval"])
            if stop:
                text = STOPPED
            if said:
                text = f"{text[:-1]}: {said}"
            elif why == approvals.REPLAY:  # the person denied nothing: an identical call used it first
                text = REPLAYED.format(aid=call["approval"])
            self._records.result(call, text, True)
            call["outcome"] = "denied"
            self._records.audit(t, call, row, "ask", call.get("reason", ""),
                                STOPPED_OUTCOME if stop else "denied" if why == "approval denied" else why)
            self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": "ask",
                           "reason": call.get("reason", ""), "result": text, "is_error": True, "tainted": t.tainted,
                           "denied": True})
            return Answer(stop=stop)
        if row is None:
            self._records.refuse(t, call, None, "unavailable", "the tool no longer exists")
            return Answer()
        return Answer(row=row)

    def recheck(self, t: Turn, call: PendingCall, row: ToolRow, verdict: str) -> bool:
        """Decide an approved call again immediately before it is sent (spec §5). True: send it; False:
        its approval was cancelled with the reason, the person told and the call refused."""
        why = redecide.refusal(self._db, call["tool"], t.origin.value, t.tainted, t.taint_source)
        if not why:
            return True
        redecide.cancel(self._db, call["approval"], why, from_status=(ApprovalStatus.APPROVED.value,))
        self._notify("notice", f"Approval {call['approval']} ({call['tool']}) was cancelled: {why}.",
                     turn_id=t.id, conversation_id=t.conversation_id, approval_id=call["approval"])
        self._records.refuse(t, call, row, verdict, why, outcome="cancelled")
        return False
