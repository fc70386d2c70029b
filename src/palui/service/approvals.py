"""Service part: the one door for answering approvals (spec §5).

Every front end (the CLI, the HTTP API, the web page, each chat channel) answers through
:meth:`ApprovalsPart.answer`: it records the answer and where it was given
(``answered_via``), re-decides an approve from the tool's current state and the turn's origin
and taint, and raises the refusals (expired, cancelled, re-decided, already answered) the same
way for all of them. It never runs the turn: the service's tick resumes it, or a CLI process
calls :meth:`TurnsPart.resume` (:meth:`answer_and_resume` does both, for in-process use).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from palui.errors import ApprovalError, NotFound, UsageError
from palui.runner import approvals
from palui.service.conversations import ConversationsPart
from palui.service.elicitations import ElicitationsPart
from palui.service.notifier import Notifier
from palui.service.reads import PAGE, ApprovalReads, shown_approval
from palui.service.rules import RulesPart
from palui.service.turn_tasks import EventSink
from palui.service.turns import TurnsPart
from palui.store import ids, redecide, scope_requests, standing
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import Approval, Elicitation, ScopeRequest, TurnResult

#: Where an answer may come from: a front end, or a chat channel's name (``telegram``, ``matrix-home``).
VIA = re.compile(r"^[a-z][a-z0-9-]{0,39}$")


class ApprovalsPart:
    """Listing and answering approvals.

    Args:
        db, notifier: the service's shared collaborators.
        redecide: re-decides pending approvals before they are listed (spec §5).
        conversations_part: the conversation of an approval's turn.
        elicitations_part: a ``/deny`` of a server's question (an ``e-…`` id) declines it.
        turns_part: going on with a turn here.
        rules: the standing approvals (spec §5.9): the answers given in advance, made by an answer "approve, and from
            now on the same" here, or listed, made and removed by a front end through this attribute
            (``svc.approvals.rules.list()``).
    """

    def __init__(self, db: Database, notifier: Notifier, redecide: Callable[[], object],
                 conversations_part: ConversationsPart, elicitations_part: ElicitationsPart,
                 turns_part: TurnsPart, rules: RulesPart) -> None:
        self.db = db
        self.notifier = notifier
        self.redecide = redecide
        self.reads = ApprovalReads(db, redecide)
        self.conversations_part = conversations_part
        self.elicitations_part = elicitations_part
        self.turns_part = turns_part
        self.rules = rules

    def sweep_expired(self) -> None:
        """A start-up step: expired approvals are swept on every start (spec §5)."""
        approvals.sweep(self.db)

    def list(self, status: str | None = "pending", limit: int = PAGE, before: str | None = None) -> list[Approval]:
        """:meth:`palui.service.reads.ApprovalReads.list` (the same query, which ``palui approvals list`` runs
        without the rest of the service)."""
        return self.reads.list(status, limit, before)

    def waiting(self) -> int:
        """How many approvals and servers' questions wait for the person now (the web page's nav count): pending
        and unexpired, counted through their (status, expires_at) indexes; reads only."""
        now = time.time()
        r = self.db.one("SELECT (SELECT COUNT(*) FROM approvals WHERE status = 'pending' AND expires_at > ?)"
                        " + (SELECT COUNT(*) FROM elicitations WHERE status = 'pending' AND expires_at > ?)",
                        (now, now))
        return int(r[0]) if r is not None else 0

    def get(self, approval_id: str) -> Approval:
        """One approval (``palui approvals show``), with its ``conversation``; a unique prefix of its id is
        enough (:func:`palui.store.ids.resolve`). Raises NotFound, UsageError (an ambiguous prefix). One past its
        expiry shows as ``expired`` before a sweep marks it so (reads only)."""
        approval_id = ids.resolve(self.db, approval_id)
        a = approvals.get(self.db, approval_id)
        r = self.db.one("SELECT status, expires_at FROM approvals WHERE id = ?", (approval_id,))
        return shown_approval({**a, "conversation": self.conversations_part.of_turn(a["turn"])}, r, time.time())

    def find(self, approval_id: str) -> Approval | None:
        """:meth:`get`, or None for an unknown id (a forged button)."""
        try:
            return self.get(approval_id)
        except NotFound:
            return None

    def answer(self, approval_id: str, approve: bool, via: str, reason: str | None = None, *,
               always: Mapping[str, str] | None = None, confirm: bool = False,
               stop: bool = False) -> Approval | Elicitation | ScopeRequest:
        """Approve or deny one pending approval, answered on ``via`` (``cli``, ``web``, ``api`` or a
        channel's name). Returns the approval as :meth:`get` does. Never runs the turn.
        ``reason`` (a denial's, at most 1,000 characters: ``/deny ID REASON``) is told to the model
        as the denial (spec §8).

        ``always`` (an approve's): "approve, and from now on the same" (spec §5.9): a standing approval is made
        from this answer, every argument pinned except those it names (argument → ``any``, ``prefix:TEXT``,
        ``one-of:A,B``); ``confirm`` confirms one for a destructive or unknown tool. It is checked before the answer
        is recorded (:meth:`RulesPart.check`), so a refused one answers nothing. ``stop`` (a denial's): "deny
        and stop" (spec §5.10): the call is denied and the turn's tool use ends.

        An approve is decided again (:mod:`palui.store.redecide`): a tool switched off, flagged
        for review, removed, or now ``unavailable``/``off`` for the turn cancels the approval with
        that reason and the person is told.

        An ``e-…`` id is a server's question (:meth:`answer_elicitation`): a deny declines it and the
        question is returned; an approve is refused. An ``s-…`` id asks for a wider scope (spec §7.11): a deny
        declines it (its tool is switched off, the person told) and the request is returned; an approve is
        refused with the sign-in that answers it.

        Raises:
            UsageError: no approval id, or an unknown ``via``.
            NotFound: no such approval.
            ApprovalError: expired (a denial: the turn goes on), cancelled (by ``/stop`` or just now by the
                re-decision: the turn goes on with the reason as the call's result), already answered.
                ``e.turn_id`` names the turn when it can go on.
        """
        if not isinstance(via, str) or not VIA.match(via) or via == standing.VIA:
            raise UsageError(f"unknown answer channel {via!r}")
        if always is not None and not approve:
            raise UsageError("only an approve makes a standing approval")
        if stop and approve:
            raise UsageError("only a denial stops the tool use")
        approval_id = ids.resolve(self.db, approval_id)  # a unique prefix is enough
        if isinstance(approval_id, str) and approval_id.startswith("e-"):
            # /deny ID works for a server's question too, on every front end and channel (spec §8).
            if approve:
                raise UsageError(f"{approval_id} is a question of an MCP server, not an approval: answer it with "
                                 f"/answer {approval_id} field=value …")
            return self.elicitations_part.answer(approval_id, "decline", None, via)
        if isinstance(approval_id, str) and approval_id.startswith("s-"):
            return self._answer_scope(approval_id, approve, via, reason)
        try:
            if reason is not None and len(reason) > 1000:
                raise UsageError("a denial's reason is at most 1,000 characters")
            if always is not None:
                self.rules.check(approval_id, always, confirm)
            approvals.answer(self.db, approval_id, approve, via,
                             refusal=lambda row: redecide.approval_refusal(self.db, row), reason=reason, stop=stop)
        except ApprovalError as e:
            if e.turn_id and "cancelled" in str(e):
                a = approvals.get(self.db, approval_id)
                self.notifier("notice", f"Approval {approval_id} ({a['tool']}) was cancelled: {a['cancel_reason']}.",
                            turn_id=a["turn"], approval_id=approval_id)
            raise
        if always is not None:
            made = self.rules.make(approval_id, always, via, confirm)
            self.notifier("notice", f"Standing approval {made['id']} made: from now on {made['tool']} runs without "
                                    f"asking in {made['context']} for {made['described']}, until {made['expires_at']}"
                                    f" (palui rules remove {made['id']} ends it).")
        return self.get(approval_id)

    def _answer_scope(self, request_id: str, approve: bool, via: str, reason: str | None) -> ScopeRequest:
        """``/approve`` or ``/deny`` of a request for a wider scope (spec §7.11)."""
        r = scope_requests.get(self.db, request_id)
        if approve:  # yes is a sign-in: it needs the person's browser, and a sign-in has its own door
            raise UsageError(f"{request_id} asks you to sign in again for {' '.join(r['needed'])}: run palui "
                             f"connectors login {r['connector']} (or use “Sign in” on its sheet); /deny {request_id} "
                             f"switches {r['tool']} off instead")
        if reason is not None and len(reason) > 1000:
            raise UsageError("a denial's reason is at most 1,000 characters")
        done = scope_requests.decline(self.db, request_id, via, reason)
        self.redecide()
        self.notifier("notice", f"{done['tool']} is switched off: {done['reason']}. Switch it on again with palui "
                                f"tools enable {done['tool']}; it asks again when it needs the scope.")
        return done

    async def answer_and_resume(self, approval_id: str, approve: bool, via: str,
                                on_event: EventSink | None = None, reason: str | None = None,
                                on_answered: Callable[[str], None] | None = None, *,
                                always: Mapping[str, str] | None = None, confirm: bool = False,
                                stop: bool = False) -> TurnResult:
        """:meth:`answer` (with a denial's ``reason``, ``always``, ``confirm``, ``stop``), then resume the
        turn here (the CLI without a live service). Returns the turn result. ``on_answered`` is told, before the
        turn goes on, what the answer became: ``approved``, ``denied``, or the refusal's sentence. A refusal that
        lets the turn go on resumes it first and is then raised, saying how the turn went on."""
        approval_id = ids.resolve(self.db, approval_id)
        if approval_id.startswith("e-"):
            return await self.elicitations_part.answer_and_resume(approval_id, "decline", None, via,
                                                                  on_event)
        if approval_id.startswith("s-"):  # no turn waits for a scope request: the answer is all there is
            done = self._answer_scope(approval_id, approve, via, reason)
            if on_answered is not None:
                on_answered(done["status"])
            if not done["turn"]:
                raise UsageError(f"{approval_id} was declined; {done['tool']} is switched off")
            return self.turns_part.result(done["turn"])
        try:
            a = self.answer(approval_id, approve, via, reason=reason, always=always, confirm=confirm, stop=stop)
        except ApprovalError as e:
            if not e.turn_id:
                raise
            if on_answered is not None:
                on_answered(str(e))
            r = await self.turns_part.resume(e.turn_id, on_event)
            went = f"{r['status']}{': ' + r['answer'] if r['answer'] else ''}"
            said = str(e).removesuffix("; the turn goes on")
            raise ApprovalError(f"{said}; the turn went on ({went})", e.turn_id) from None
        if on_answered is not None:
            on_answered(a["status"])
        return await self.turns_part.resume(a["turn"], on_event)
