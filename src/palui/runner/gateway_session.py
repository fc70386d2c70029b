"""A gateway session's door to the governed call (spec §8.6; docs/decisions/0176-one-governed-call.md).

Another MCP client's call runs through :meth:`GovernedCall.run <palui.runner.governed_call.GovernedCall.run>`,
the same steps in the same order as a turn's calls. :class:`GatewaySession` holds no step: it reads the session
and hands the gateway's :class:`~palui.runner.call_options.CallOptions`:

- the client and the session are every audit row's columns, and the client every approval's reason (``client``);
- the brake's pause of the gateway, or the session's stop, refuses the call and the session goes on
  (``halted``, ``halt_stops`` False); a call in flight is cancelled by either within a second (``guard``);
- a call has its own time (``time_left``: :data:`CALL_SECONDS`; the connector's start at most 30 s of it);
- the loop rules and the person's denials count the client's calls, every session, until the person clears
  the client (``history``, ``scope``), its reads never as repeats (``read_repeats``);
- the client's offer: the tools of its connectors, a built-in one (``recall``, ``tasks``, ``web``) only when given
  by name (``offer``);
- the client's calls per hour and ``caps.gateway_calls_per_hour``, counting the calls sent to a connector (``cap``);
- an ask waits ``gateway.wait_seconds`` for the person's answer while the client's request is there; the
  approval runs nothing by itself, and an identical later call of the client, in any session, waits on or
  consumes it until it expires (``approval`` ``wait``, ``gone``);
- a server's questions during the call are refused (``questions`` False);
- the client's context is unseen, so the Rule of Two fails closed (``unknown_context``).

A session is a turn row of its client's conversation (every session of the client shares it: its taint, its
untrusted content, its approvals), which no process runs and nothing resumes. Its taint is read again at every
call, so a result that tainted another session of the client taints this one too. Its calls in flight are its
``pending`` while they run: the durable ``sent`` marker of each, so a session stopped or a service that died
with one in flight audits it ``cancelled; may have run``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from palui.connectors.base import ToolResult
from palui.runner import state as st
from palui.runner.call_history import ClientHistory
from palui.runner.call_options import CallOptions
from palui.runner.call_records import CallRecords
from palui.runner.gateway_cap import GatewayCap
from palui.runner.governed_call import GovernedCall
from palui.runner.offer import NOT_THE_CLIENTS, gateway_offers
from palui.runner.pending import CallState, args_hash, read_call
from palui.runner.state import EarlierTurns, Turn
from palui.runner.stop_guard import StopGuard, StopRequested
from palui.runner.turn_events import TurnEvents
from palui.store import audit, catalog, gateway_pause

if TYPE_CHECKING:
    from palui.connectors.base import Ask
    from palui.runner.call_options import Progress
    from palui.runner.deps import RunnerDeps
    from palui.store.tools import ToolRow

#: Why a gateway session's context is unseen (spec §8.6): its taint source, and why the Rule of Two fails closed.
UNKNOWN_CONTEXT = "the client's context is unknown"
#: Seconds a gateway call may take at most, its connector's start included (the connector's own limits apply
#: first; a wait for the person does not count).
CALL_SECONDS = 300.0
ENDED = "Error: this gateway session has ended; start a new session."


class ReadRefused(Exception):
    """A read of a resource or prompt that did not happen; its message says why (for the client)."""
STOPPED_IN_FLIGHT = "Error: the call was stopped while it ran, and it may have run: {why}."


@dataclass(frozen=True)
class Scope:
    """Who calls: the client's ``name``, the connectors it was given (None: every MCP connector), its ``session``
    id and its own calls per hour (None: ``caps.gateway_client_calls_per_hour``)."""

    name: str
    connectors: tuple[str, ...] | None
    session: str | None = None
    calls_per_hour: int | None = None


class GatewaySession:
    """The calls of one gateway session.

    Args:
        deps: the database, settings, connector hub and the person's channel.
        scope: the calling client.
        turn_id: the session's turn row.
        wait_seconds: how long a call waits for the person's answer (``gateway.wait_seconds``).
        turns: the session turns this process holds, by id: a session's turn is loaded once and kept (its
            events grow with every call; reading them all again per call would make a call's cost grow with
            the session), and the calls of one session share it. Its status, stop flag and conversation's
            taint, which other processes and sessions change, are read again at each call.
    """

    def __init__(self, deps: RunnerDeps, scope: Scope, turn_id: str, wait_seconds: float,
                 turns: dict[str, Turn]) -> None:
        self._deps = deps
        self._scope = scope
        self._turn_id = turn_id
        self._wait = wait_seconds
        self._turns = turns
        self._events = TurnEvents(None)

    def _turn(self) -> Turn | None:
        """The session's turn as it is now (None: the session ended): its stop flag, and the client's taint, which
        another session may have brought, read again."""
        db = self._deps.db
        now = db.one("SELECT t.status, t.stop_requested, t.conversation_id, c.tainted, c.taint_source FROM turns t"
                     " JOIN conversations c ON c.id = t.conversation_id WHERE t.id = ?", (self._turn_id,))
        t = self._turns.get(self._turn_id) or (st.load(db, self._turn_id) if now is not None else None)
        if now is None or now["status"] != "running" or t is None:
            self._turns.pop(self._turn_id, None)
            return None
        self._turns[self._turn_id] = t
        t.stop_requested = bool(now["stop_requested"])
        if now["tainted"] and not t.tainted:  # another session of the client was tainted: the client carries it
            t.tainted, t.taint_source = True, now["taint_source"]
        return t

    def _cap(self) -> GatewayCap:
        return GatewayCap(self._deps.db, self._deps.settings, self._scope.name, self._scope.calls_per_hour)

    async def call(self, tool: str, args: Any, progress: Progress | None = None,
                   gone: Callable[[], bool] | None = None, ask: Ask | None = None) -> ToolResult:
        """Run ``tool(args)`` through the governed call for this session. Returns what the client is told: the
        tool's result, or an error result saying why it did not run. ``gone`` says the client's request went away
        (its connection closed): a call waiting for its approval stops waiting, and the approval is left for the
        client's identical retry. ``ask`` puts a server's question to the client itself (a trusted client that
        declared elicitation); without it, or for a question asking for a secret, the person is asked."""
        db = self._deps.db
        t = self._turn()
        if t is None:
            return ToolResult(ENDED, is_error=True)
        call = read_call(st.new_id("gc"), tool, args)
        t.steps += 1  # a gateway session's step is a call (the taint source names it)
        started = time.monotonic()
        options = CallOptions(
            client=self._scope.name, halted=self._halted, halt_stops=False,
            time_left=lambda _t: CALL_SECONDS - (time.monotonic() - started),
            guard=StopGuard(db, lambda: 0.0, self._stopped),
            history=ClientHistory(db, self._scope.name, t.conversation_id), scope="client", offer=self._offered,
            cap=self._cap(), approval="wait", questions=True, session=self._scope.session,
            save=lambda turn: st.save(db, turn), wait_seconds=self._wait, progress=progress,
            unknown_context=UNKNOWN_CONTEXT, gone=gone, result="wire",
            forward=(ask, self._scope.name) if ask is not None else None, read_repeats="uncounted")
        governed = GovernedCall(self._deps, options, self._events, EarlierTurns(db))
        t.pending = [*(t.pending or []), call]  # in flight: its sent marker is stored with the session
        try:
            await governed.run(t, call)
        except StopRequested:  # the brake or a stop while the call ran: the sender audited "cancelled; may have run"
            call["result"] = STOPPED_IN_FLIGHT.format(why=self._halted(t) or "stopped")
            call["is_error"], call["state"] = True, CallState.DONE
            options.history.record(t, call, False)
        finally:
            t.pending = [c for c in t.pending or [] if c is not call] or None
            wire = call.pop("wire", None)  # the server's result goes to the client, never into the store
            st.save(db, t)
        return ToolResult(call.get("result", "Error: the call was not run."), is_error=bool(call.get("is_error")),
                          wire=wire)

    async def read(self, connector: str, what: str, target: str,
                   fetch: Callable[[], Awaitable[tuple[dict[str, Any], list[str]]]]) -> dict[str, Any]:
        """A governed read of a connector's resource or prompt (spec §8.6): ``what`` is ``resources/read`` or
        ``prompts/get``, ``target`` the URI or the prompt's name. Refused (:class:`ReadRefused`) when the session
        ended, the brake pauses the gateway, the connector is not the client's to read now (no tool of it switched
        on and offered to the client: its switches hold its resources and prompts too) or a cap is reached; else
        ``fetch()`` gives the server's answer and the texts it carries. The read is audited (tool ``CONNECTOR__WHAT``,
        class ``read``), counted by the client's cap, and taints the client as a tool's result would, unless the
        connector is a trusted source. Returns the server's answer."""
        db = self._deps.db
        t = self._turn()
        if t is None:
            raise ReadRefused(ENDED.removeprefix("Error: "))
        name = f"{connector}__{what}"
        call = read_call(st.new_id("gr"), name, {"target": target})
        t.steps += 1
        why = self._halted(t) or self._readable(connector) or self._cap().over() or self._cap().take()
        if why:
            self._audit(t, call, connector, why, "refused")
            raise ReadRefused(why)
        started = time.monotonic()
        try:
            answer, texts = await fetch()
        except Exception as e:  # the connector's own error, in its words
            self._audit(t, call, connector, f"read: {what} of {connector}", "error", started)
            raise ReadRefused(str(e)) from None
        row = db.one("SELECT trusted_source FROM connectors WHERE id = ?", (connector,))
        if texts and not (row is not None and row["trusted_source"]):
            self._records().taint(t, f"{name} at step {t.steps}", texts, f"{what} of MCP connector {connector}")
        self._audit(t, call, connector, f"read: {what} of {connector}", "ok", started)
        st.save(db, t)
        return answer

    def _readable(self, connector: str) -> str | None:
        """Why the client may not read ``connector``'s resources or prompts now, or None."""
        snap = catalog.snapshot(self._deps.db)
        if any(r.connector == connector and r.usable and r.enabled and not r.connector_signin
               and gateway_offers(r, self._scope.connectors) for r in snap.tools.values()):
            return None
        return f"connector {connector} offers this client nothing now (none of its tools is on for it)"

    def _records(self) -> CallRecords:
        return CallRecords(self._deps.db, self._deps.settings, self._deps.job_connectors, lambda *_: None,
                           self._scope.name, self._scope.session)

    def _audit(self, t: Turn, call: Any, connector: str, reason: str, outcome: str,
               started: float | None = None) -> None:
        took = None if started is None else (time.monotonic() - started) * 1000
        audit.record(self._deps.db, turn_id=t.id, tool=call["tool"], tool_class="read", class_source="connector",
                     origin=t.origin.value, tainted=t.tainted, verdict="run" if outcome != "refused" else "off",
                     reason=reason, args_hash=args_hash(call["args"]), outcome=outcome, duration_ms=took,
                     client=self._scope.name, session=self._scope.session)

    def _halted(self, t: Turn) -> str | None:
        """The gateway's brake step: the brake's pause of the gateway, or this session's stop flag."""
        db = self._deps.db
        if gateway_pause.paused(db) is not None:
            return gateway_pause.PAUSED
        return "the session was stopped" if st.stop_requested(db, t.id) else None

    def _stopped(self, turn_id: str) -> bool:
        """What the call in flight runs under: the brake's pause of the gateway, or the session's stop flag."""
        db = self._deps.db
        return gateway_pause.paused(db) is not None or st.stop_requested(db, turn_id)

    def _offered(self, t: Turn, row: ToolRow | None, name: str) -> str | None:
        """The client's offer: the tools of its connectors, a built-in one only when given by name (spec §8.6)."""
        return None if gateway_offers(row, self._scope.connectors) else NOT_THE_CLIENTS
