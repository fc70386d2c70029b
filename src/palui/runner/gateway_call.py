"""One call another MCP client made through the gateway, governed like a turn's call (spec §8.6).

A gateway session is a conversation of origin ``gateway`` with one turn row (its taint, its approvals,
its events). :class:`GatewayCall` decides and runs one call of a session with the runner's own
collaborators, so the rules are the same as a turn's and are not copied: the tool as stored now
(:func:`~palui.runner.offer.usable_tool`), the matrix with origin ``gateway``, the Rule of Two
(:class:`~palui.runner.rule_of_two.RuleOfTwo`), the approval gate (:class:`~palui.runner.approvals.ApprovalGate`:
the approval is stored, audited and told to the person's channel, and consumed once), and the call
records (:class:`~palui.runner.call_records.CallRecords`: the result's taint, the audit row). What differs
from a turn: nobody resumes the session's turn. The waiting call polls its approval for up to
``gateway.wait_seconds`` and, when it is answered, goes on itself; when it is not, the client is told
the approval's id and calls again (an identical call of the same session waits on, or consumes, the
same approval).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from palui.connectors.base import CallContext, ToolResult
from palui.policy.matrix import decide
from palui.runner import approvals, redecide
from palui.runner import state as st
from palui.runner.approval_gate import ApprovalGate
from palui.runner.call_records import CallRecords
from palui.runner.offer import is_builtin, usable_tool
from palui.runner.pending import CallState, PendingCall
from palui.runner.rule_of_two import RuleOfTwo
from palui.runner.state import EarlierTurns, Turn
from palui.runner.turn_events import Emit, TurnEvents
from palui.types import NEEDS_TASKS, Decision, Origin, Verdict

if TYPE_CHECKING:
    from palui.runner.deps import RunnerDeps
    from palui.store.tools import ToolRow

#: Why a gateway session's Rule of Two fails closed (spec §8.6): the taint source of its session too.
UNKNOWN_CONTEXT = "the client's context is unknown"
#: How often a waiting call looks at its approval, and tells the client its progress, in seconds.
POLL_SECONDS = 0.2
PROGRESS_SECONDS = 1.0
#: The audit outcome of a call refused by ``caps.gateway_calls_per_hour`` (not counted by the cap).
OVER_CAP = "refused: over cap"
#: Seconds a call may run at most (the connector's own limits apply first).
CALL_SECONDS = 300.0
#: ``progress(done, total, message)``: a progress notification to the client, when it asked for them.
Progress = Callable[[float, float | None, str], Awaitable[None]]


@dataclass(frozen=True)
class Scope:
    """Who calls: the client's ``name`` and the connectors it was given (None: every connector)."""

    name: str
    connectors: tuple[str, ...] | None


class _ClientRecords(CallRecords):
    """The call records of a gateway session: every audit row's reason names the client (spec §8.6: every
    call is audited in the chain with the client's name; the row's turn is the session's turn row)."""

    def __init__(self, deps: RunnerDeps, client: str, emit: Emit) -> None:
        super().__init__(deps.db, deps.settings, deps.job_connectors, emit)
        self._client = client

    def audit(self, t: Turn, call: PendingCall, row: ToolRow | None, verdict: str, reason: str, outcome: str,
              duration_ms: float | None = None) -> None:
        super().audit(t, call, row, verdict, f"gateway client {self._client}: {reason}", outcome, duration_ms)


class GatewayCall:
    """Decides and runs the calls of one gateway session.

    Args:
        deps: the database, settings, connector hub and the person's channel.
        scope: the calling client.
        turn_id: the session's turn row.
        wait_seconds: how long a call waits for the person's answer (``gateway.wait_seconds``).
        turns: the session turns this process holds, by id: a session's turn is loaded once and kept (its
            events grow with every call; reading them all again per call would make a call's cost grow
            with the session), and the calls of one session share it. Its status and stop flag, which
            other processes change, are read again at each call.
    """

    def __init__(self, deps: RunnerDeps, scope: Scope, turn_id: str, wait_seconds: float,
                 turns: dict[str, Turn]) -> None:
        self._deps = deps
        self._scope = scope
        self._turn_id = turn_id
        self._wait = wait_seconds
        self._turns = turns
        self._events = TurnEvents(None)
        self._records = _ClientRecords(deps, scope.name, self._events.emit)
        self._gate = ApprovalGate(deps.db, deps.settings, deps.notify, self._records, self._events.emit)
        self._rule_of_two = RuleOfTwo(deps.db, EarlierTurns(deps.db), UNKNOWN_CONTEXT)

    async def call(self, tool: str, args: dict[str, Any], progress: Progress | None = None) -> ToolResult:
        """Decide ``tool(args)`` for this session and run it, ask for it, or refuse it. Returns what the client
        is told: the tool's result, or an error result saying why it did not run."""
        db = self._deps.db
        now = db.one("SELECT status, stop_requested FROM turns WHERE id = ?", (self._turn_id,))
        if now is None or now["status"] != "running":
            self._turns.pop(self._turn_id, None)
            return ToolResult("Error: this gateway session has ended; start a new session.", is_error=True)
        t = self._turns.get(self._turn_id) or st.load(db, self._turn_id)
        if t is None:
            return ToolResult("Error: this gateway session has ended; start a new session.", is_error=True)
        self._turns[self._turn_id] = t
        t.stop_requested = bool(now["stop_requested"])
        call: PendingCall = {"id": st.new_id("gc"), "tool": tool, "args": args, "state": CallState.TODO,
                             "bad_args": None}
        if t.stop_requested:
            return self._refused(t, call, None, "off", "the session was stopped (palui stop --all)")
        if not _finite(args):  # NaN and ±Infinity: what would be approved is not what JSON can send on
            return ToolResult("Error: the arguments hold a number JSON cannot carry (NaN or Infinity); the call "
                              "was not decided.", is_error=True)
        if over := self._over_cap():
            return self._refused(t, call, None, "off", over, OVER_CAP)
        row = usable_tool(db, tool)
        if row is None or is_builtin(row) or (self._scope.connectors is not None
                                              and row.connector not in self._scope.connectors):
            return self._refused(t, call, row, "unavailable", "no tool of this client has this name")
        # the MCP connector is started first: connecting re-checks its pins (spec §7.6)
        try:
            await self._deps.hub.get(row.connector)
        except Exception as e:
            return self._refused(t, call, row, "run", f"connector {row.connector} is not available: "
                                                      f"{str(e)[:200]}", "error")
        row = usable_tool(db, tool)  # connecting may have flagged it
        if row is None:
            return self._refused(t, call, None, "unavailable", "the tool is no longer listed by its server")
        d = decide(row.tool_class, row.enabled, Origin.GATEWAY, t.tainted, t.taint_source)
        if d.verdict in (Verdict.OFF, Verdict.UNAVAILABLE):
            return self._refused(t, call, row, d.verdict.value, d.reason.split(": ", 1)[1])
        if row.changed or row.needs_tasks:
            why = "the tool is flagged \"changed — review\"" if row.changed else f"the tool {NEEDS_TASKS}"
            return self._refused(t, call, row, "off", why)
        d = self._rule_of_two.check(t, call, row, d)
        if d.verdict is Verdict.ASK:
            return await self._asked(t, call, row, d, progress)
        return await self._send(t, call, row, d.verdict.value, d.reason, approved=False)

    async def _asked(self, t: Turn, call: PendingCall, row: ToolRow, d: Decision,
                     progress: Progress | None) -> ToolResult:
        """Wait on this session's approval of the identical call (a retry), or ask for a new one."""
        db = self._deps.db
        same = db.one("SELECT id, tool_call_id FROM approvals WHERE turn_id = ? AND tool = ? AND args_hash = ? AND"
                      " (status = 'pending' OR (status = 'approved' AND used = 0)) ORDER BY created_at DESC LIMIT 1",
                      (t.id, call["tool"], approvals.args_hash(call["args"])))
        if same is not None:
            call["id"], call["approval"], call["state"] = same["tool_call_id"], same["id"], CallState.ASKED
            call["reason"] = d.reason
        else:
            asked = Decision(d.verdict, f"{d.reason}; asked by the gateway client {self._scope.name}", d.source)
            await self._gate.ask(t, call, row, asked)
            st.save(db, t)
        aid = call["approval"]
        deadline = time.monotonic() + self._wait
        told = 0.0  # when the client was last told progress (monotonic seconds)
        while approvals.status(db, aid) == "pending" and time.monotonic() < deadline:
            if st.stop_requested(db, t.id):  # the emergency brake: the wait ends with the approval
                redecide.cancel(db, aid, approvals.STOPPED)
                break
            if progress is not None and time.monotonic() - told >= PROGRESS_SECONDS:
                told = time.monotonic()
                left = max(0.0, deadline - told)
                await progress(self._wait - left, self._wait, f"waiting for the person to answer approval {aid}")
            await asyncio.sleep(POLL_SECONDS)
        answer = self._gate.answer(t, call)
        if answer.held:
            return ToolResult(f"Error: approval pending: {aid}. The person has been asked on their channels; "
                              "call again after approving (the same call with the same arguments).", is_error=True)
        if answer.row is None:  # denied, expired or cancelled: the gate answered and audited it
            st.save(db, t)
            return ToolResult(call.get("result", "Error: the call was not run."), is_error=True)
        if not self._gate.recheck(t, call, answer.row, "ask"):
            st.save(db, t)
            return ToolResult(call.get("result", "Error: the call was not run."), is_error=True)
        return await self._send(t, call, answer.row, "ask", call.get("reason", d.reason), approved=True)

    async def _send(self, t: Turn, call: PendingCall, row: ToolRow, verdict: str, reason: str,
                    approved: bool) -> ToolResult:
        deps = self._deps
        conn = await deps.hub.get(row.connector)
        ctx = CallContext(turn_id=t.id, conversation_id=t.conversation_id, origin=Origin.GATEWAY, tainted=t.tainted,
                          taint_source=t.taint_source, step=t.steps, db=deps.db, settings=deps.settings,
                          notifier=deps.notify, tool=row)
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(conn.call_tool(row.tool, call["args"], ctx), CALL_SECONDS)
        except TimeoutError:
            result = ToolResult("Error: the call ran out of time.", is_error=True)
        except Exception as e:  # a connector bug must not break the session
            result = ToolResult(f"Error: {type(e).__name__}: {str(e)[:500]}", is_error=True)
        if result.input_required is not None:
            result = ToolResult("Error: the server asked questions during the call; answering them through the "
                                "gateway is not supported.", is_error=True)
        t.steps += 1
        self._records.returned(t, call, row, result, verdict, reason, approved, (time.monotonic() - started) * 1000)
        st.save(deps.db, t)
        return result

    def _over_cap(self) -> str | None:
        """Why one more call would pass ``caps.gateway_calls_per_hour`` (every client's calls of the last 60
        minutes, over-cap refusals not counted), saying when the next is possible; None when it would not."""
        cap = self._deps.settings.caps.gateway_calls_per_hour
        now = time.time()
        rows = self._deps.db.all("SELECT time FROM audit WHERE origin = 'gateway' AND time > ? AND outcome != ?"
                                 " ORDER BY time DESC LIMIT ?", (now - 3600, OVER_CAP, cap))
        if len(rows) < cap:
            return None
        until = datetime.fromtimestamp(rows[-1]["time"] + 3600, UTC).strftime("%H:%M:%S UTC")
        return f"caps.gateway_calls_per_hour ({cap}) is reached: the next call is possible at {until}"

    def _refused(self, t: Turn, call: PendingCall, row: ToolRow | None, verdict: str, reason: str,
                 outcome: str = "refused") -> ToolResult:
        self._records.refuse(t, call, row, verdict, reason, outcome)
        st.save(self._deps.db, t)
        return ToolResult(call.get("result", f"Error: {reason}"), is_error=True)


def _finite(value: Any) -> bool:
    """Whether every number in ``value`` (JSON: dicts, lists, scalars) is finite; NaN and ±Infinity are not JSON."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True
