"""One governed call: every tool call, of a turn or of a gateway session, passes the same steps in the same
order (spec §3-§7, §8.6; docs/decisions/0176-one-governed-call.md).

:data:`STEPS` is the one list. A door (the turn's pending-calls walk, :mod:`palui.runner.pending_calls`; a
gateway session, :mod:`palui.runner.gateway_session`) calls :meth:`GovernedCall.run` with a call and chooses
:class:`~palui.runner.call_options.CallOptions`, never steps. Each step answers the call (refused, not run,
denied, sent and recorded), holds it (the turn pauses for the person), or lets it go on to the next::

    stopped      the brake or a stop                      → the turn stops (turn) / refused (gateway)
    interrupted  found sent: it may have run              → never sent again
    eliciting    a server's questions answered            → sent again with the answers
    time         no time left                             → not run: time budget
    retry        an identical call's approval is open     → that call, to wait on or consume (gateway)
    loops        repeat, error streak, denials, deny and stop → not run: loop stopped
                 a read repeated, its results identical   → answered with the earlier result (turn)
    denied       the person denied this same call         → denied before, not asked again
    answered     asked before                             → held (no answer yet), denied, or approved
    offered      not the door's tool                      → refused
    connected    its MCP connector does not start in time → refused
    switches     off or unavailable in this turn          → refused
    review       flagged "changed — review"               → refused
    arguments    strict JSON, size, the input schema      → refused as the model's error, nothing stored
    cap          the door's cap on calls                  → refused (counted only when sent)
    rule_of_two  a run that reaches outside, tainted      → ask
    gate         ask, its marks found:
                 a mark from the source of a call denied  → refused without asking (spec §5.10)
                 a standing approval answers it           → approved in advance, no card (spec §5.9)
                 else                                     → asked: held (turn) / waits for the answer (gateway)
    send         the cap counts it, the sent marker, the   → sent, recorded (audit, taint, marks)
                 brake, in time

A call whose approval was granted (step ``answered``, or ``gate`` on a waiting door) skips the deciding steps
(``offered`` to ``rule_of_two``: they ran when it was asked) and is decided again right before ``send``
(:meth:`~palui.runner.approval_gate.ApprovalGate.recheck`). The collaborators that own the steps are built
here, once per door, from its options.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from palui.policy import standing as standing_rules
from palui.runner.approval_gate import ApprovalGate
from palui.runner.call_decider import CallDecider
from palui.runner.call_records import CallRecords
from palui.runner.call_sender import CallSender
from palui.runner.gateway_cap import OVER_CAP
from palui.runner.loop_guard import LoopGuard
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall
from palui.runner.person_denials import STOPPED_BY_PERSON, PersonDenials
from palui.runner.rule_of_two import RuleOfTwo
from palui.runner.server_questions import ServerQuestions
from palui.runner.stop_guard import StopRequested
from palui.store import standing
from palui.types import Decision, Verdict

if TYPE_CHECKING:
    from palui.runner.call_options import CallOptions
    from palui.runner.deps import RunnerDeps
    from palui.runner.state import EarlierTurns, Turn
    from palui.runner.turn_clock import TurnClock
    from palui.runner.turn_events import TurnEvents
    from palui.store.tools import ToolRow

#: The steps, in order: the one list (the module docstring says what each does).
STEPS = ("stopped", "interrupted", "eliciting", "time", "retry", "loops", "denied", "answered", "offered",
         "connected", "switches", "review", "arguments", "cap", "rule_of_two", "gate", "send")
#: The steps an approved call skips: they decided it when it was asked (it is decided again before ``send``).
DECIDING = frozenset(STEPS[STEPS.index("offered"):STEPS.index("gate") + 1])

#: What :meth:`GovernedCall.run` returns: the call is answered, or held (the turn pauses for the person).
Outcome = Literal["done", "held"]
#: What a waiting door's caller is told when the person has not answered yet.
PENDING = ("Error: approval pending: {aid}. The person has been asked on their channels; call again after approving "
           "(the same call with the same arguments).")



@dataclass
class _Passing:
    """One call on its way through the steps: what the steps found so far."""

    t: Turn
    call: PendingCall
    row: ToolRow | None = None
    decision: Decision | None = None
    approved: bool = False
    retried: bool = False
    unanswered: bool = False  # a waiting door's call answered "approval pending": neither a success nor a failure


class GovernedCall:
    """The governed call of one door.

    Args:
        deps: the database, settings, connector hub and the person's channel.
        options: the door's options.
        events: the turn's events (every collaborator's sink).
        earlier: the earlier turns' messages (the Rule of Two reads the private results the model saw).
        clock: a turn's clock (a server's question stops it while the person answers); None for a gateway call.
    """

    def __init__(self, deps: RunnerDeps, options: CallOptions, events: TurnEvents, earlier: EarlierTurns,
                 clock: TurnClock | None = None) -> None:
        self.options = options
        emit = events.emit
        self.records = CallRecords(deps.db, deps.settings, deps.job_connectors, emit, options.client, options.session,
                                   options.result == "wire")
        self.denials = PersonDenials(deps.db, self.records, emit, options.scope)
        self.loops = LoopGuard(deps.db, deps.settings, self.records, emit, self.denials, options.history,
                               "this turn's" if options.scope == "turn" else "this client's", options.read_repeats)
        self.gate = ApprovalGate(deps.db, deps.settings, deps.notify, self.records, emit)
        waits = options.approval == "wait"  # a gateway call settles a server's questions while it waits
        questions = ServerQuestions(deps.db, deps.settings, deps.notify, self.records, emit, options.save, clock,
                                    options.wait_seconds if waits else None, options.forward) \
            if options.questions and (clock is not None or waits) else None
        self.sender = CallSender(deps, self.records, self.gate, questions, events, options)
        self.decider = CallDecider(deps.db, deps.settings, deps.hub, self.records, options.offer, options.time_left)
        self.rule_of_two = RuleOfTwo(deps.db, earlier, options.unknown_context)
        self._db = deps.db
        self._notify = deps.notify

    async def run(self, t: Turn, call: PendingCall) -> Outcome:
        """Take ``call`` through :data:`STEPS`. Returns ``held`` when the turn must pause for the person (an
        approval, a server's questions), else ``done`` (the call is answered: ``call["result"]``). The door's
        history records the answered call.

        Raises:
            StopRequested: the turn was stopped (a turn's door: ``halt_stops``), before or while the call ran.
        """
        p = _Passing(t, call)
        for name in STEPS:
            if p.approved and name in DECIDING:
                continue
            outcome: Outcome | None = await getattr(self, f"_{name}")(p)
            if outcome is not None:
                if outcome == "done" and call["state"] == CallState.DONE and not p.unanswered:
                    self.options.history.record(t, call, p.retried)
                return outcome
        raise AssertionError("the send step answers every call")  # pragma: no cover

    # -- the steps, in the order of STEPS ------------------------------------------------------------

    async def _stopped(self, p: _Passing) -> Outcome | None:
        why = self.options.halted(p.t)
        if not why:
            return None
        if self.options.halt_stops:
            raise StopRequested()
        self.records.refuse(p.t, p.call, usable_tool(self._db, p.call["tool"]), "off", why)
        return "done"

    async def _interrupted(self, p: _Passing) -> Outcome | None:
        if p.call["state"] != CallState.SENT:
            return None
        self.records.interrupted(p.t, p.call)
        return "done"

    async def _eliciting(self, p: _Passing) -> Outcome | None:
        if p.call["state"] != CallState.ELICITING:
            return None
        return "held" if await self.sender.resume_elicited(p.t, p.call) else "done"

    async def _time(self, p: _Passing) -> Outcome | None:
        # spec §6.1: after the time budget is spent, no call reaches a connector (an approval still pending
        # is read first: it may be denied, which sends nothing)
        if self.options.time_left(p.t) > 0 or (p.call["state"] == CallState.ASKED and not self.gate.approved(p.call)):
            return None
        self.records.not_dispatched(p.t, p.call)
        return "done"

    async def _retry(self, p: _Passing) -> Outcome | None:
        if self.options.approval == "wait" and p.call["state"] == CallState.TODO and not p.call.get("bad_args"):
            p.retried = self.gate.retried(p.t, p.call)
        return None

    async def _loops(self, p: _Passing) -> Outcome | None:
        if (earlier := self.loops.again(p.t, p.call)) is not None:  # a read repeated with identical results
            self.loops.answer_again(p.t, p.call, earlier)
            return "done"
        why = self.loops.reason(p.t, p.call)
        if why is None:
            return None
        self.loops.not_run(p.t, p.call, why)
        return "done"

    async def _denied(self, p: _Passing) -> Outcome | None:
        earlier = self.denials.earlier(p.t, p.call)
        if earlier is None:
            return None
        self.denials.refuse(p.t, p.call, earlier)  # spec §6.3: the person is not asked twice
        return "done"

    async def _answered(self, p: _Passing) -> Outcome | None:
        if p.call["state"] != CallState.ASKED:
            return None
        return await self._answer(p)

    async def _offered(self, p: _Passing) -> Outcome | None:
        p.row = self.decider.offered(p.t, p.call)
        return None if p.row is not None else "done"

    async def _connected(self, p: _Passing) -> Outcome | None:
        assert p.row is not None
        p.row = await self.decider.connected(p.t, p.call, p.row)
        return None if p.row is not None else "done"

    async def _switches(self, p: _Passing) -> Outcome | None:
        assert p.row is not None
        p.decision = self.decider.switches(p.t, p.call, p.row)
        return None if p.decision is not None else "done"

    async def _review(self, p: _Passing) -> Outcome | None:
        assert p.row is not None and p.decision is not None
        return None if self.decider.review(p.t, p.call, p.row, p.decision) else "done"

    async def _arguments(self, p: _Passing) -> Outcome | None:
        assert p.row is not None
        return None if self.decider.arguments(p.t, p.call, p.row) else "done"

    async def _cap(self, p: _Passing) -> Outcome | None:
        why = self.options.cap.over() if self.options.cap is not None else None
        if not why:
            return None
        assert p.decision is not None
        self.records.refuse(p.t, p.call, p.row, p.decision.verdict.value, why, outcome=OVER_CAP)
        return "done"

    async def _rule_of_two(self, p: _Passing) -> Outcome | None:
        assert p.row is not None and p.decision is not None
        p.decision = self.rule_of_two.check(p.t, p.call, p.row, p.decision)
        return None

    async def _gate(self, p: _Passing) -> Outcome | None:
        assert p.row is not None and p.decision is not None
        if p.decision.verdict is not Verdict.ASK:
            return None
        d = p.decision
        if self.options.client:
            d = Decision(d.verdict, f"{d.reason}; asked by the gateway client {self.options.client}", d.source)
        marks = await self.gate.marks(p.t, p.call, p.row)
        if same := self.denials.same_source(p.t, marks):  # spec §5.10: the person said no to that content
            self.denials.refuse_same_source(p.t, p.call, p.row, *same)
            return "done"
        context = standing_rules.context_of(p.t.origin.value, p.t.tainted, self.options.client)
        rule = standing.find(self._db, row=p.row, context=context, args=p.call["args"], marks=marks,
                             rule_of_two=d.reason if d.source == "rule of two" else None, notify=self._notify)
        if rule is not None:  # spec §5.9: the person's answer given in advance, no card sent
            self.gate.by_rule(p.t, p.call, p.row, d, rule)
            self.options.save(p.t)
            p.approved = True
            return None
        await self.gate.ask(p.t, p.call, p.row, d, marks)
        self.options.save(p.t)
        return "held" if self.options.approval == "pause" else await self._answer(p)

    async def _send(self, p: _Passing) -> Outcome | None:
        assert p.row is not None
        if p.approved:
            verdict, reason = "ask", p.call.get("reason", "")
        else:
            assert p.decision is not None
            verdict, reason = p.decision.verdict.value, p.decision.reason
        held = await self.sender.send(p.t, p.call, p.row, verdict, reason, approved=p.approved)
        return "held" if held else "done"

    # -- the person's answer ---------------------------------------------------------------------------

    async def _answer(self, p: _Passing) -> Outcome | None:
        """The held call's approval: a turn pauses while it is pending; a gateway call waits for it (then, still
        pending, the caller is told its id). Approved: the call goes on to ``send``."""
        o = self.options
        here = True
        if o.approval == "wait":
            here = await self.gate.wait(p.t, p.call, o.wait_seconds, o.halted, o.progress, o.gone)
        # a caller gone away leaves the approval as it is: it runs nothing by itself, only an identical retry
        answer = self.gate.answer(p.t, p.call) if here else None
        if answer is not None and answer.held and o.approval == "pause":
            return "held"
        if answer is None or answer.held:
            aid, p.unanswered = p.call["approval"], True
            self.records.result(p.call, PENDING.format(aid=aid), True)
            return "done"
        if answer.stop:  # "deny and stop" (spec §5.10): the tool use ends as a loop stop ends it
            self.loops.history.stop = STOPPED_BY_PERSON
        if answer.row is None:  # denied, expired or cancelled: the gate answered and audited it
            return "done"
        p.row, p.approved = answer.row, True
        return None

