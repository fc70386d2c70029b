"""Service part: the one door for answering approvals (spec §5).

Every front end (the CLI, the HTTP API, the web page, each chat channel) answers through
:meth:`ApprovalsPart.answer_approval`: it records the answer and where it was given
(``answered_via``), re-decides an approve from the tool's current state and the turn's origin
and taint, and raises the refusals (expired, cancelled, re-decided, already answered) the same
way for all of them. It never runs the turn: the service's tick resumes it, or a CLI process
calls :meth:`TurnsPart.resume_turn` (:meth:`answer_and_resume` does both, for in-process use).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from palui.errors import ApprovalError, UsageError
from palui.runner import approvals, redecide
from palui.service.conversations import ConversationsPart
from palui.service.elicitations import ElicitationsPart
from palui.service.notifier import Notifier
from palui.service.turn_tasks import EventSink
from palui.service.turns import TurnsPart
from palui.store import ids
from palui.store.db import Database

if TYPE_CHECKING:
    from palui.results import Approval, Elicitation, TurnResult

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
    """

    def __init__(self, db: Database, notifier: Notifier, redecide: Callable[[], object],
                 conversations_part: ConversationsPart, elicitations_part: ElicitationsPart,
                 turns_part: TurnsPart) -> None:
        self.db = db
        self.notifier = notifier
        self.redecide = redecide
        self.conversations_part = conversations_part
        self.elicitations_part = elicitations_part
        self.turns_part = turns_part

    def approvals(self, status: str | None = "pending") -> list[Approval]:
        """Approvals, oldest first (``status=None`` lists all); pending ones are re-decided first, so a
        tool switched off meanwhile no longer shows an approval that could run (spec §5)."""
        approvals.sweep(self.db)
        self.redecide()
        sql = "SELECT a.*, t.conversation_id FROM approvals a LEFT JOIN turns t ON t.id = a.turn_id"
        if status:
            rows = self.db.all(sql + " WHERE a.status = ? ORDER BY a.created_at", (status,))
        else:
            rows = self.db.all(sql + " ORDER BY a.created_at")
        return [{**approvals.as_dict(r), "conversation": r["conversation_id"]} for r in rows]

    def approval(self, approval_id: str) -> Approval:
        """One approval (``palui approvals show``), with its ``conversation``; a unique prefix of its id is
        enough (:func:`palui.store.ids.resolve`). Raises NotFound, UsageError (an ambiguous prefix)."""
        approval_id = ids.resolve(self.db, approval_id)
        approvals.sweep(self.db)
        a = approvals.get(self.db, approval_id)
        return {**a, "conversation": self.conversations_part.conversation_of(a["turn"])}

    def answer_approval(self, approval_id: str, approve: bool, via: str,
                        reason: str | None = None) -> Approval | Elicitation:
        """Approve or deny one pending approval, answered on ``via`` (``cli``, ``web``, ``api`` or a
        channel's name). Returns the approval as :meth:`approval` does. Never runs the turn.
        ``reason`` (a denial's, at most 1,000 characters: ``/deny ID REASON``) is told to the model
        as the denial (spec §8).

        An approve is decided again (:mod:`palui.runner.redecide`): a tool switched off, flagged
        for review, removed, or now ``unavailable``/``off`` for the turn cancels the approval with
        that reason and the person is told.

        An ``e-…`` id is a server's question (:meth:`answer_elicitation`): a deny declines it and the
        question is returned; an approve is refused.

        Raises:
            UsageError: no approval id, or an unknown ``via``.
            NotFound: no such approval.
            ApprovalError: expired (a denial: the turn goes on), cancelled (by ``/stop`` or just now by the
                re-decision: the turn goes on with the reason as the call's result), already answered.
                ``e.turn_id`` names the turn when it can go on.
        """
        if not isinstance(via, str) or not VIA.match(via):
            raise UsageError(f"unknown answer channel {via!r}")
        approval_id = ids.resolve(self.db, approval_id)  # a unique prefix is enough
        if isinstance(approval_id, str) and approval_id.startswith("e-"):
            # /deny ID works for a server's question too, on every front end and channel (spec §8).
            if approve:
                raise UsageError(f"{approval_id} is a question of an MCP server, not an approval: answer it with "
                                 f"/answer {approval_id} field=value …")
            return self.elicitations_part.answer_elicitation(approval_id, "decline", None, via)
        try:
            if reason is not None and len(reason) > 1000:
                raise UsageError("a denial's reason is at most 1,000 characters")
            approvals.answer(self.db, approval_id, approve, via,
                             refusal=lambda row: redecide.approval_refusal(self.db, row), reason=reason)
        except ApprovalError as e:
            if e.turn_id and "cancelled" in str(e):
                a = approvals.get(self.db, approval_id)
                self.notifier("notice", f"Approval {approval_id} ({a['tool']}) was cancelled: {a['cancel_reason']}.",
                            turn_id=a["turn"], approval_id=approval_id)
            raise
        return self.approval(approval_id)

    async def answer_and_resume(self, approval_id: str, approve: bool, via: str,
                                on_event: EventSink | None = None, reason: str | None = None,
                                on_answered: Callable[[str], None] | None = None) -> TurnResult:
        """:meth:`answer_approval` (with a denial's ``reason``), then resume the turn here (the CLI
        without a live service). Returns the turn result. ``on_answered`` is told, before the turn goes
        on, what the answer became: ``approved``, ``denied``, or the refusal's sentence. A refusal that
        lets the turn go on resumes it first and is then raised, saying how the turn went on."""
        approval_id = ids.resolve(self.db, approval_id)
        if approval_id.startswith("e-"):
            return await self.elicitations_part.answer_elicitation_and_resume(approval_id, "decline", None, via,
                                                                              on_event)
        try:
            a = self.answer_approval(approval_id, approve, via, reason=reason)
        except ApprovalError as e:
            if not e.turn_id:
                raise
            if on_answered is not None:
                on_answered(str(e))
            r = await self.turns_part.resume_turn(e.turn_id, on_event)
            went = f"{r['status']}{': ' + r['answer'] if r['answer'] else ''}"
            said = str(e).removesuffix("; the turn goes on")
            raise ApprovalError(f"{said}; the turn went on ({went})", e.turn_id) from None
        if on_answered is not None:
            on_answered(a["status"])
        return await self.turns_part.resume_turn(a["turn"], on_event)
