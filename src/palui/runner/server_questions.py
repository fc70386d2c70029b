"""The runner's half of elicitation: a server's question goes to the person, never to the model (spec §7).

:class:`ServerQuestions` is held by the call sender (:mod:`palui.runner.call_sender`), which sends a call
and, for a 2026-07-28 server, sends it again with the answers.

- **Older connections** (the question arrives inside the open call): :meth:`ServerQuestions.asker` is
  the call's ``CallContext.ask``. It stores the question (``in_call``), tells the person, and waits
  for the answer with the turn's clock stopped (:meth:`TurnClock.wait_begin` / ``wait_end``), then
  returns the reply to the server. A stop, the expiry or the end of the process ends the wait.
- **2026-07-28 connections** (an ``input_required`` result): :meth:`ServerQuestions.store_round` stores
  the questions and the request state with the call (state ``eliciting``) and pauses the turn like an
  approval; :meth:`ServerQuestions.resume` says when every question of the round is answered (or
  expired), in whichever process resumes the turn: the sender then sends the call again
  (:class:`SendAgain`) and marks the replies sent.
- **A gateway call** (spec §8.6) cannot pause: its questions are settled while the call waits. A question goes
  to the calling client itself (``forward``: a ``--context trusted`` client that declared elicitation) when it
  is a form asking for no secret; any other goes to the person, and the call waits ``patience`` seconds
  (``gateway.wait_seconds``) for the answer, after which the question is cancelled and the server told so.
- Without asking the person, Palui declines: more than ``mcp.max_elicitations_per_call`` questions
  in one call (counted over its rounds), a requested schema that is not a flat object of the
  spec's primitive schemas, a URL-mode question in a job turn, and a form that asks for a secret
  (:mod:`palui.text.secret_fields`) from a connector the person did not allow to (the person is told,
  naming the server). The audit keeps the action and the field names of every reply, never values.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from palui.connectors.base import Ask, InputRequired, Question, Reply, Resume
from palui.errors import ApprovalError
from palui.runner import audit, caps, redecide
from palui.runner import elicitations as store
from palui.runner.offer import usable_tool
from palui.runner.pending import CallState, PendingCall, args_hash
from palui.text.elicitation import question_text, schema_problem
from palui.text.secret_fields import refusal_notice, secret_fields
from palui.text.when import stamped
from palui.types import Origin

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.connectors.base import PersonChannel
    from palui.results import TurnElicitation
    from palui.runner.call_records import CallRecords
    from palui.runner.state import Turn
    from palui.runner.turn_clock import TurnClock
    from palui.runner.turn_events import Emit
    from palui.store.db import Database
    from palui.store.tools import ToolRow

POLL_SECONDS = 0.2  # how often a waiting call looks for the person's answer (it may come from another process)
#: Why a gateway call's question is cancelled when the person did not answer while the call waited.
NOT_IN_TIME = "not answered while the gateway call waited (gateway.wait_seconds)"
MAX_ROUNDS = 10  # input-required rounds of one call (the SDK's own default cap)


@dataclass(frozen=True)
class SendAgain:
    """A paused call's round is answered: send it to ``row`` again with ``resume`` (the verdict and reason
    it was first sent with), then mark the replies ``ids`` sent (:meth:`ServerQuestions.mark_sent`)."""

    row: ToolRow
    verdict: str
    reason: str
    resume: Resume
    ids: list[str]


#: ``waiting``: a question of the round is not answered (the turn pauses); ``finished``: the call was
#: answered here with an error; :class:`SendAgain`: send it again.
RoundOutcome = Literal["waiting", "finished"] | SendAgain


class ServerQuestions:
    """Questions of MCP servers during one turn's calls.

    Args:
        db: the ``elicitations`` table, the audit, the catalog.
        settings: ``mcp.max_elicitations_per_call`` and the approval expiry of each origin.
        notify: the person's channel (the question).
        records: answers and audits a call that ends here.
        emit: the turn's event sink.
        save: persists the turn (:meth:`TurnRunner.save`): a stored round survives a restart.
        clock: the turn's clock, stopped while the person is asked inside an open call; None for a gateway call.
        patience: how long a gateway call waits for the person's answer (seconds); None: a turn, which waits
            (inside an open call) or pauses (a round) until the question is answered or expires.
        forward: the gateway client that may answer a form asking for no secret itself, and its name.
    """

    def __init__(self, db: Database, settings: Settings, notify: PersonChannel, records: CallRecords, emit: Emit,
                 save: Callable[[Turn], None], clock: TurnClock | None, patience: float | None = None,
                 forward: tuple[Ask, str] | None = None) -> None:
        self._db = db
        self._settings = settings
        self._notify = notify
        self._records = records
        self._emit = emit
        self._save = save
        self._clock = clock
        self.patience = patience
        self._forward = forward

    # -- what Palui declines without asking -------------------------------------------------------------

    def _secret_refusal(self, t: Turn, q: Question, connector: str) -> str | None:
        """Why a form asking for a secret is refused (the person is told, naming the server), or None: it asks
        for none, or the person allowed the connector to ask for secrets (spec §7.8)."""
        kinds = secret_fields(q.schema) if q.mode == "form" else {}
        if not kinds:
            return None
        row = self._db.one("SELECT name, secret_questions FROM connectors WHERE id = ?", (connector,))
        if row is not None and row["secret_questions"]:
            return None
        what = sorted(set(kinds.values()))
        self._notify("notice", refusal_notice(row["name"] if row else connector, connector, kinds), turn_id=t.id,
                     conversation_id=t.conversation_id)
        return f"asked for {' and '.join(what)}: refused; use the server's own sign-in"

    def _auto_decline(self, t: Turn, q: Question, number: int, connector: str) -> str | None:
        """Why Palui declines question number ``number`` of a call itself, or None (the person is asked)."""
        limit = self._settings.mcp.max_elicitations_per_call
        if number > limit:
            return f"more than {limit} questions in one call (mcp.max_elicitations_per_call)"
        if q.mode == "url" and t.origin is not Origin.CHAT:
            return "a URL-mode question is declined in a job turn"
        secret = self._secret_refusal(t, q, connector)
        if secret:
            return secret
        if q.mode == "form":
            problem = schema_problem(q.schema)
            if problem:
                return f"Palui declines forms it cannot show: {problem}"
        return None

    def _forwards(self, q: Question, why: str | None) -> bool:
        """Whether ``q`` goes to the calling gateway client instead of the person: a form asking for no secret,
        that Palui would not decline itself, from a client that may be asked (spec §8.6)."""
        return (self._forward is not None and why is None and q.mode == "form"
                and not secret_fields(q.schema))

    async def _ask_client(self, e: TurnElicitation, q: Question) -> None:
        """Put ``q`` (stored as ``e``) to the calling gateway client and record its reply as the answer."""
        assert self._forward is not None
        ask, client = self._forward
        try:
            reply = await ask(q)
        except Exception:  # the client could not answer (gone, refused the request): the server is told cancel
            reply = Reply("cancel")
        with contextlib.suppress(ApprovalError):
            store.answer(self._db, e["id"], reply.action, reply.content, f"gateway client {client}")

    def _store(self, t: Turn, call: PendingCall, row: ToolRow, q: Question, era: str, round_no: int,
               why: str | None, tell: bool = True) -> TurnElicitation:
        e = store.create(self._db, turn_id=t.id, call_id=call["id"], tool=row.name, connector=row.connector,
                         era=era, question=q, origin=t.origin.value,
                         expiry_seconds=self._settings.approvals.expiry(t.origin),
                         round_no=round_no, auto=Reply("decline") if why else None, reason=why)
        self._emit(t, {"type": "elicitation", "elicitation": e["id"], "tool": row.name, "connector": row.connector,
                       "mode": q.mode, "message": q.message, "url": q.url, "url_host": e["url_host"],
                       "fields": e["fields"], "status": e["status"], "reason": why, "expires_at": e["expires_at"],
                       "era": era})
        if why is None and tell:
            zone = caps.zone(self._settings.caps.timezone)
            until = f"expires {stamped(e['expires_at'], zone)}" if e["expires_at"] else None
            self._notify("elicitation", question_text(e, expires=until), turn_id=t.id,
                         conversation_id=t.conversation_id, elicitation_id=e["id"])
        return e

    def _audit_reply(self, t: Turn, call: PendingCall, row: ToolRow | None, e: TurnElicitation,
                     reply: Reply) -> None:
        """Audit one reply: the action and the field names, never a value (spec §10)."""
        named = sorted((reply.content or {}).keys()) if reply.action == "accept" else []
        audit.record(self._db, turn_id=t.id, tool=call["tool"], tool_class=row.tool_class.value if row else None,
                     class_source=row.class_source.value if row else None, origin=t.origin.value, tainted=t.tainted,
                     verdict="ask", reason=f"question {e['id']} from {e['connector']} ({e['mode']})"
                     + (f": {e['reason']}" if e.get("reason") else ""), args_hash=args_hash(call["args"]),
                     outcome=f"elicitation {reply.action}" + (f" (fields: {', '.join(named)})" if named else ""))
        self._emit(t, {"type": "elicitation_answer", "elicitation": e["id"], "action": reply.action, "fields": named})

    # -- older connections: the question waits inside the open call ----------------------------------------

    def asker(self, t: Turn, call: PendingCall, row: ToolRow) -> Ask:
        """``CallContext.ask`` for one call: see the module docstring."""
        asked = [0]

        async def ask(q: Question) -> Reply:
            asked[0] += 1
            why = self._auto_decline(t, q, asked[0], row.connector)
            forwards = self._forwards(q, why)
            e = self._store(t, call, row, q, "in_call", 1, why, tell=not forwards)
            if why is not None:
                reply = Reply("decline")
            elif forwards:
                await self._ask_client(e, q)
                reply = store.reply_of(self._db, e["id"]) or Reply("cancel")
            else:
                if self._clock is not None:
                    self._clock.wait_begin()
                try:
                    reply = await self._wait_for(e["id"])
                finally:
                    if self._clock is not None:
                        self._clock.wait_end()
            store.mark_sent(self._db, [e["id"]])
            self._audit_reply(t, call, usable_tool(self._db, call["tool"]), store.get(self._db, e["id"]), reply)
            return reply

        return ask

    async def _wait_for(self, eid: str) -> Reply:
        """The person's reply to ``eid`` (polled: it may be given in another process). ``/stop`` cancels
        the call itself (the turn's guard) and the question with it (``cancel`` is sent). A gateway call waits
        :attr:`patience` seconds, then the question is cancelled (``cancel`` is sent)."""
        deadline = None if self.patience is None else time.monotonic() + self.patience
        while True:
            reply = store.reply_of(self._db, eid)
            if reply is not None:
                return reply
            if deadline is not None and time.monotonic() >= deadline:
                store.cancel(self._db, eid, NOT_IN_TIME)
                return Reply("cancel")
            await asyncio.sleep(POLL_SECONDS)

    async def settle(self, t: Turn, call: PendingCall) -> RoundOutcome:
        """A gateway call's stored round, settled while the call waits: the questions that may go to the client
        are put to it, the person is waited for :attr:`patience` seconds (then the questions left are cancelled),
        and the round is resumed (:meth:`resume`)."""
        ids = list(call["elicit"]["ids"])
        row = usable_tool(self._db, call["tool"])
        for e in store.for_ids(self._db, ids):
            q = store.question_of(e)
            if e["status"] == store.PENDING and row is not None and self._forwards(q, None):
                await self._ask_client(e, q)
        deadline = time.monotonic() + (self.patience or 0.0)
        while (outcome := self.resume(t, call)) == "waiting" and time.monotonic() < deadline:
            await asyncio.sleep(POLL_SECONDS)
        if outcome == "waiting":
            store.cancel_for_call(self._db, t.id, call["id"], NOT_IN_TIME)
            outcome = self.resume(t, call)
        return outcome

    # -- 2026-07-28: input-required results, durable across restarts -----------------------------------------

    def store_round(self, t: Turn, call: PendingCall, row: ToolRow, ir: InputRequired, verdict: str = "run",
                    reason: str = "") -> RoundOutcome:
        """Store a round's questions with the call and save the turn. ``waiting`` when the turn pauses for
        the person; else the call is finished here (an error) or is to be sent again at once (every
        question declined by Palui)."""
        info = call.get("elicit") or {"round": 0, "asked": 0}
        round_no = int(info["round"]) + 1
        if ir.other:
            return self._error(t, call, row, "the server asked for sampling or roots, which Palui does not"
                               " offer; the call was not finished")
        if round_no > MAX_ROUNDS:
            return self._error(t, call, row, f"the server asked again after {MAX_ROUNDS} rounds; the call"
                               " was not finished")
        asked = int(info["asked"]) + len(ir.questions)
        limit = self._settings.mcp.max_elicitations_per_call
        ids = []
        for i, q in enumerate(ir.questions, start=1):
            why = (f"more than {limit} questions in one call (mcp.max_elicitations_per_call)" if asked > limit
                   else self._auto_decline(t, q, int(info["asked"]) + i, row.connector))
            ids.append(self._store(t, call, row, q, "input_required", round_no, why)["id"])
        call["state"] = CallState.ELICITING
        call["elicit"] = {"round": round_no, "asked": asked, "request_state": ir.request_state, "ids": ids,
                          "verdict": verdict, "reason": reason}
        self._save(t)
        if any(e["status"] == store.PENDING for e in store.for_ids(self._db, ids)):
            return "waiting"
        return self.resume(t, call)

    def _error(self, t: Turn, call: PendingCall, row: ToolRow | None, why: str) -> Literal["finished"]:
        text = f"Error: {why}."
        self._records.result(call, text, True)
        call.pop("elicit", None)
        self._records.audit(t, call, row, "run", why, "error")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": "run",
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted})
        return "finished"

    def resume(self, t: Turn, call: PendingCall) -> RoundOutcome:
        """A paused call's round: ``waiting`` while a question has no reply; else the replies are audited
        and the call is to be sent again, unless the tool may no longer run (re-decided, spec §5)."""
        info = call["elicit"]
        ids = list(info["ids"])
        replies: dict[str, Reply] = {}
        answered = []
        for e in store.for_ids(self._db, ids):
            reply = store.reply_of(self._db, e["id"])
            if reply is None:
                return "waiting"
            replies[e["key"]] = reply
            answered.append((e, reply))
        row = usable_tool(self._db, call["tool"])
        why = "the tool no longer exists" if row is None else redecide.refusal(
            self._db, call["tool"], t.origin.value, t.tainted, t.taint_source)
        if why or row is None:
            store.mark_sent(self._db, ids)
            return self._error(t, call, row, f"the call was not sent again: {why}")
        for e, reply in answered:
            self._audit_reply(t, call, row, e, reply)
        return SendAgain(row=row, verdict=info.get("verdict") or "run",
                         reason=info.get("reason") or "answers to the server's questions",
                         resume=Resume(replies=replies, request_state=info.get("request_state")), ids=ids)

    def mark_sent(self, again: SendAgain) -> None:
        """The call was sent again (or its sending ended): the replies went, their content is dropped."""
        store.mark_sent(self._db, again.ids)
