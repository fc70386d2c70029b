"""Service part: the one door for answering a server's question to the person (spec §7.8).

An elicitation goes where approvals go: every front end (the CLI, the HTTP API, the web page, each
chat channel) answers through :meth:`ElicitationsPart.answer_elicitation`, which checks the answer
against the requested schema before anything is stored (field names in the refusal, never values),
records it with where it was given (``answered_via``), and never runs the turn. A turn paused by a
2026-07-28 server goes on in the service's tick (or :meth:`answer_elicitation_and_resume` in a CLI
process); on an older connection the call that waits inside the open connection sees the answer
itself, in whichever process holds it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from palui.errors import ApprovalError, UsageError
from palui.runner import elicitations as store
from palui.service.conversations import ConversationsPart
from palui.service.turn_tasks import EventSink
from palui.service.turns import TurnsPart
from palui.store import ids
from palui.store.db import Database
from palui.text.elicitation import answer_problems, apply_defaults

if TYPE_CHECKING:
    from palui.results import Elicitation, TurnElicitation, TurnResult

#: Where an answer may come from: a front end, or a chat channel's name (the same words as approvals).
VIA = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
ACTIONS = ("accept", "decline", "cancel")


class ElicitationsPart:
    """Listing and answering the questions MCP servers ask the person.

    Args:
        db: the database (the questions).
        conversations_part: the conversation of a question's turn.
        turns_part: going on with a turn here, or its result.
    """

    def __init__(self, db: Database, conversations_part: ConversationsPart, turns_part: TurnsPart) -> None:
        self.db = db
        self.conversations_part = conversations_part
        self.turns_part = turns_part

    def _with_conversation(self, e: TurnElicitation) -> Elicitation:
        return {**e, "conversation": self.conversations_part.conversation_of(e["turn"])}

    def elicitations(self, status: str | None = "pending", limit: int = 100) -> list[Elicitation]:
        """Questions oldest first, each as :meth:`elicitation` gives it. ``status="pending"``: those waiting now
        (pending and unexpired); another status or None (all): the newest ``limit`` (1-1,000) of them. Reads
        only, through indexes (docs/decisions/draft-reads-bounded.md). Raises UsageError for a bad ``limit``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise UsageError("a page of questions holds 1 to 1,000")
        return [self._with_conversation(e) for e in store.listing(self.db, status, limit)]

    def elicitation(self, elicitation_id: str) -> Elicitation:
        """One question: ``{"id","turn","conversation","tool","connector","era","mode","message","schema",
        "fields","url","url_host","status","action","reason","answered_via","created_at","expires_at",…}``
        (the server's words as sent: show them through ``palui.text.display``); a unique prefix of the id is
        enough. Raises NotFound, UsageError (an ambiguous prefix). One past its expiry shows as ``expired`` (a
        decline) before the service's sweep marks it so; reads only."""
        elicitation_id = ids.resolve(self.db, elicitation_id)
        return self._with_conversation(store.get(self.db, elicitation_id))

    def answer_elicitation(self, elicitation_id: str, action: str, content: dict[str, Any] | None = None,
                           via: str = "api") -> Elicitation:
        """Answer one pending question: ``accept`` (a form's ``content``, checked against its schema, the
        schema's defaults filling what was left out, SEP-1034; URL mode: "I opened it"), ``decline`` or
        ``cancel``. Returns the question as :meth:`elicitation` does. Never runs the turn.

        Raises:
            UsageError: an unknown ``via`` or action, or content that does not fit the schema (the
                problems name the fields, never the values).
            NotFound: no such question.
            ApprovalError: expired (a decline: the turn goes on, ``e.turn_id`` set), cancelled (``/stop``),
                or already answered.
        """
        if not isinstance(via, str) or not VIA.match(via):
            raise UsageError(f"unknown answer channel {via!r}")
        if action not in ACTIONS:
            raise UsageError(f"an answer is accept, decline or cancel (got {action!r})")
        elicitation_id = ids.resolve(self.db, elicitation_id)  # a unique prefix is enough
        e = store.get(self.db, elicitation_id)
        answer: dict[str, Any] | None = None
        if action == "accept" and e["mode"] == "form" and e["status"] == store.PENDING:
            if content is not None and not isinstance(content, dict):
                raise UsageError("a form's answer is an object of field: value")
            answer = apply_defaults(e["schema"] or {}, content or {})
            problems = answer_problems(e["schema"] or {}, answer)
            if problems:
                raise UsageError(f"the answer to {elicitation_id} does not fit its question: " + "; ".join(problems))
        return self._with_conversation(store.answer(self.db, elicitation_id, action, answer, via))

    async def answer_elicitation_and_resume(self, elicitation_id: str, action: str,
                                            content: dict[str, Any] | None = None, via: str = "cli",
                                            on_event: EventSink | None = None) -> TurnResult:
        """:meth:`answer_elicitation`, then go on with a turn paused by a 2026-07-28 server here (the CLI
        without a live service). Returns the turn result (an older-era turn is still running: its
        current state)."""
        try:
            e = self.answer_elicitation(elicitation_id, action, content, via)
        except ApprovalError as err:
            if not err.turn_id:
                raise
            return await self.turns_part.resume_turn(err.turn_id, on_event)
        if e["era"] != "input_required":
            return self.turns_part.turn_result(e["turn"], [])
        return await self.turns_part.resume_turn(e["turn"], on_event)
