"""Service part: the one door for answering a server's question to the person (spec §7.8).

An elicitation goes where approvals go: every front end (the CLI, the HTTP API, the web page, each
chat channel) answers through :meth:`ElicitationsPart.answer`, which checks the answer
against the requested schema before anything is stored (field names in the refusal, never values),
records it with where it was given (``answered_via``), and never runs the turn. A turn paused by a
2026-07-28 server goes on in the service's tick (or :meth:`answer_and_resume` in a CLI
process); on an older connection the call that waits inside the open connection sees the answer
itself, in whichever process holds it.

A question with secret fields (:mod:`palui.text.secret_fields`) reached the person only because they
allowed secret questions for its connector (:meth:`ElicitationsPart.allow_secret_questions`). Its answer
is taken only from the terminal or the web page (never a chat channel: the value would stay in the chat's
history), only in a process that can send it (the one holding an older-era call), and it is held in that
process's memory, never stored (:mod:`palui.runner.secret_answers`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from palui.errors import ApprovalError, NotFound, UsageError
from palui.runner import elicitations as store
from palui.runner.state import OWNER
from palui.service.conversations import ConversationsPart
from palui.service.turn_tasks import EventSink
from palui.service.turns import TurnsPart
from palui.store import ids
from palui.store.db import Database
from palui.text.elicitation import answer_problems, apply_defaults
from palui.text.secret_fields import secret_fields

if TYPE_CHECKING:
    from palui.results import Elicitation, TurnElicitation, TurnResult

#: Where an answer may come from: a front end, or a chat channel's name (the same words as approvals).
VIA = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
ACTIONS = ("accept", "decline", "cancel")
#: Where a secret answer may come from: a hidden prompt on a terminal, a password box on the web page
#: (``api``: the HTTP API both use). A chat channel keeps what is typed in its history.
SECRET_VIA = ("cli", "web", "api")


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
        return {**e, "conversation": self.conversations_part.of_turn(e["turn"])}

    def list(self, status: str | None = "pending", limit: int = 100) -> list[Elicitation]:
        """Questions oldest first, each as :meth:`get` gives it. ``status="pending"``: those waiting now
        (pending and unexpired); another status or None (all): the newest ``limit`` (1-1,000) of them. Reads
        only, through indexes (docs/decisions/0154-reads-bounded.md). Raises UsageError for a bad ``limit``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise UsageError("a page of questions holds 1 to 1,000")
        return [self._with_conversation(e) for e in store.listing(self.db, status, limit)]

    def get(self, elicitation_id: str) -> Elicitation:
        """One question: ``{"id","turn","conversation","tool","connector","era","mode","message","schema",
        "fields","url","url_host","status","action","reason","answered_via","created_at","expires_at",…}``
        (the server's words as sent: show them through ``palui.text.display``); a unique prefix of the id is
        enough. Raises NotFound, UsageError (an ambiguous prefix). One past its expiry shows as ``expired`` (a
        decline) before the service's sweep marks it so; reads only."""
        elicitation_id = ids.resolve(self.db, elicitation_id)
        return self._with_conversation(store.get(self.db, elicitation_id))

    def answer(self, elicitation_id: str, action: str, content: dict[str, Any] | None = None,
               via: str = "api") -> Elicitation:
        """Answer one pending question: ``accept`` (a form's ``content``, checked against its schema, the
        schema's defaults filling what was left out, SEP-1034; URL mode: "I opened it"), ``decline`` or
        ``cancel``. Returns the question as :meth:`get` does. Never runs the turn.

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
        secret = bool(e["mode"] == "form" and secret_fields(e["schema"]))
        if action == "accept" and e["mode"] == "form" and e["status"] == store.PENDING:
            if content is not None and not isinstance(content, dict):
                raise UsageError("a form's answer is an object of field: value")
            if secret:
                self._secret_answer_allowed(e, via)
            answer = apply_defaults(e["schema"] or {}, content or {})
            problems = answer_problems(e["schema"] or {}, answer)
            if problems:
                raise UsageError(f"the answer to {elicitation_id} does not fit its question: " + "; ".join(problems))
        return self._with_conversation(store.answer(self.db, elicitation_id, action, answer, via,
                                                    secret=secret and action == "accept"))

    def _secret_answer_allowed(self, e: TurnElicitation, via: str) -> None:
        """Raises UsageError unless this answer to a secret question may be taken here (see the module)."""
        fields = ", ".join(sorted(secret_fields(e["schema"])))
        if via not in SECRET_VIA:
            raise UsageError(f"question {e['id']} asks for a secret ({fields}): it is not answered in a chat, whose "
                             "history would keep it; answer it on the web page or with palui elicitations answer "
                             f"{e['id']} (a hidden prompt)")
        row = self.db.one("SELECT secret_questions FROM connectors WHERE id = ?", (e["connector"],))
        if row is None or not row["secret_questions"]:
            raise UsageError(f"question {e['id']} asks for a secret ({fields}) and {e['connector']} may no longer ask "
                             f"for secrets (palui connectors allow-secret-questions {e['connector']})")
        if e["era"] == "in_call" and store.holder(self.db, e["id"]) != OWNER:
            raise UsageError(f"question {e['id']} asks for a secret ({fields}): Palui keeps such an answer only in "
                             "the memory of the process that sends it, and its call waits in another one; answer it "
                             "there (its terminal, or the web page of the service running it)")

    def allow_secret_questions(self, connector: str, allow: bool = True) -> None:
        """Let an MCP connector's questions ask for secrets (or not, ``allow=False``): such a question is then
        asked with hidden input instead of refused (spec §7.8); ``connectors show`` says which.
        Raises NotFound (no such connector), UsageError (not an MCP connector)."""
        row = self.db.one("SELECT kind FROM connectors WHERE id = ?", (connector,))
        if row is None:
            raise NotFound(f"no connector {connector!r} (see: palui connectors list)")
        if row["kind"] != "mcp":
            raise UsageError(f"{connector} is built in: only MCP servers ask questions")
        with self.db.write() as c:
            c.execute("UPDATE connectors SET secret_questions = ? WHERE id = ?", (int(allow), connector))

    async def answer_and_resume(self, elicitation_id: str, action: str,
                                content: dict[str, Any] | None = None, via: str = "cli",
                                on_event: EventSink | None = None) -> TurnResult:
        """:meth:`answer`, then go on with a turn paused by a 2026-07-28 server here (the CLI
        without a live service). Returns the turn result (an older-era turn is still running: its
        current state)."""
        try:
            e = self.answer(elicitation_id, action, content, via)
        except ApprovalError as err:
            if not err.turn_id:
                raise
            return await self.turns_part.resume(err.turn_id, on_event)
        if e["era"] != "input_required":
            return self.turns_part.result(e["turn"], [])
        return await self.turns_part.resume(e["turn"], on_event)
