"""The runner's half of elicitation: a server's question goes to the person, never to the model (SPEC §7).

Mixed into :class:`~palui.runner.turn.TurnRunner` next to :class:`~palui.runner.calls.CallsMixin`.

- **Older connections** (the question arrives inside the open call): :meth:`ElicitMixin._asker` is
  the call's ``CallContext.ask``. It stores the question (``in_call``), tells the person, and waits
  for the answer with the turn's clock stopped (:meth:`_wait_begin`/:meth:`_wait_end`), then returns
  the reply to the server. A stop, the expiry or the end of the process ends the wait.
- **2026-07-28 connections** (an ``input_required`` result): :meth:`_input_required` stores the
  questions and the request state with the call (``state: "eliciting"``) and pauses the turn like
  an approval; :meth:`_resume_elicited` sends the call again with the answers when every question
  of the round is answered (or expired), in whichever process resumes the turn.
- Without asking the person, Palui declines: more than ``mcp.max_elicitations_per_call`` questions
  in one call (counted over its rounds), a requested schema that is not a flat object of the
  spec's primitive schemas, a URL-mode question in a job turn. The audit keeps the action and the
  field names of every reply, never values.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from palui.connectors.base import Ask, InputRequired, Question, Reply, Resume
from palui.runner import audit, redecide
from palui.runner import elicitations as store
from palui.text.elicitation import question_text, schema_problem
from palui.types import Origin

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.deps import RunnerDeps
    from palui.runner.state import Turn
    from palui.store.db import Database
    from palui.store.tools import ToolRow

POLL_SECONDS = 0.2  # how often a waiting call looks for the person's answer (it may come from another process)
MAX_ROUNDS = 10  # input-required rounds of one call (the SDK's own default cap)


class ElicitMixin:
    """Questions of MCP servers during a turn's calls. Uses these of the turn runner:"""

    deps: RunnerDeps
    db: Database
    settings: Settings
    _wait_start: float | None = None
    _paused_ever: float = 0.0
    _paused_stretch: float = 0.0

    def _emit(self, t: Turn, event: dict[str, Any]) -> None:
        raise NotImplementedError

    def _save(self, t: Turn) -> None:
        raise NotImplementedError

    def _row(self, name: str) -> ToolRow | None:
        raise NotImplementedError

    # -- the turn's clock stops while the person is asked (SPEC §6, §7) ------------------------------

    def _wait_begin(self) -> None:
        if self._wait_start is None:
            self._wait_start = time.monotonic()

    def _wait_end(self) -> None:
        self._pause_flush(time.monotonic())
        self._wait_start = None

    def _pause_flush(self, now: float) -> None:
        """Move the ongoing wait into the counters (``_paused_stretch``: since the last clock sync)."""
        if self._wait_start is not None:
            d = now - self._wait_start
            self._paused_ever += d
            self._paused_stretch += d
            self._wait_start = now

    def _paused_total(self) -> float:
        """Seconds this run spent waiting for the person, the ongoing wait included (monotonic)."""
        self._pause_flush(time.monotonic())
        return self._paused_ever

    def _take_paused(self) -> float:
        """Seconds paused since the last call (the clock sync subtracts them from the counted time)."""
        self._pause_flush(time.monotonic())
        d, self._paused_stretch = self._paused_stretch, 0.0
        return d

    def _peek_paused(self) -> float:
        self._pause_flush(time.monotonic())
        return self._paused_stretch

    # -- what Palui declines without asking -------------------------------------------------------------

    def _expiry(self, t: Turn) -> float:
        key = "approvals.job_expiry_seconds" if t.origin is Origin.JOB else "approvals.chat_expiry_seconds"
        return float(self.settings.get(key))

    def _auto_decline(self, t: Turn, q: Question, number: int) -> str | None:
        """Why Palui declines question number ``number`` of a call itself, or None (the person is asked)."""
        limit = int(self.settings.get("mcp.max_elicitations_per_call"))
        if number > limit:
            return f"more than {limit} questions in one call (mcp.max_elicitations_per_call)"
        if q.mode == "url" and t.origin is not Origin.CHAT:
            return "a URL-mode question is declined in a job turn"
        if q.mode == "form":
            problem = schema_problem(q.schema)
            if problem:
                return f"Palui declines forms it cannot show: {problem}"
        return None

    def _store(self, t: Turn, call: dict[str, Any], row: ToolRow, q: Question, era: str, round_no: int,
               why: str | None) -> dict[str, Any]:
        e = store.create(self.db, turn_id=t.id, call_id=call["id"], tool=row.name, connector=row.connector, era=era,
                         question=q, origin=t.origin.value, expiry_seconds=self._expiry(t), round_no=round_no,
                         auto=Reply("decline") if why else None, reason=why)
        self._emit(t, {"type": "elicitation", "elicitation": e["id"], "tool": row.name, "connector": row.connector,
                       "mode": q.mode, "message": q.message, "url": q.url, "url_host": e["url_host"],
                       "fields": e["fields"], "status": e["status"], "reason": why, "expires_at": e["expires_at"],
                       "era": era})
        if why is None:
            self.deps.notify("elicitation", question_text(e), turn_id=t.id, conversation_id=t.conversation_id,
                             elicitation_id=e["id"])
        return e

    def _audit_reply(self, t: Turn, call: dict[str, Any], row: ToolRow | None, e: dict[str, Any],
                     reply: Reply) -> None:
        """Audit one reply: the action and the field names, never a value (SPEC §10, issue 14)."""
        from palui.runner.approvals import args_hash

        named = sorted((reply.content or {}).keys()) if reply.action == "accept" else []
        audit.record(self.db, turn_id=t.id, tool=call["tool"], tool_class=row.tool_class.value if row else None,
                     class_source=row.class_source.value if row else None, origin=t.origin.value, tainted=t.tainted,
                     verdict="ask", reason=f"question {e['id']} from {e['connector']} ({e['mode']})"
                     + (f": {e['reason']}" if e.get("reason") else ""), args_hash=args_hash(call["args"]),
                     outcome=f"elicitation {reply.action}" + (f" (fields: {', '.join(named)})" if named else ""))
        self._emit(t, {"type": "elicitation_answer", "elicitation": e["id"], "action": reply.action, "fields": named})

    # -- older connections: the question waits inside the open call ----------------------------------------

    def _asker(self, t: Turn, call: dict[str, Any], row: ToolRow) -> Ask:
        """``CallContext.ask`` for one call: see the module docstring."""
        asked = [0]

        async def ask(q: Question) -> Reply:
            asked[0] += 1
            why = self._auto_decline(t, q, asked[0])
            e = self._store(t, call, row, q, "in_call", 1, why)
            if why is not None:
                reply = Reply("decline")
            else:
                self._wait_begin()
                try:
                    reply = await self._wait_for(t, e["id"])
                finally:
                    self._wait_end()
            store.mark_sent(self.db, [e["id"]])
            self._audit_reply(t, call, self._row(call["tool"]), store.get(self.db, e["id"]), reply)
            return reply

        return ask

    async def _wait_for(self, t: Turn, eid: str) -> Reply:
        """The person's reply to ``eid`` (polled: it may be given in another process). ``/stop`` cancels
        the call itself (the turn's guard) and the question with it (``cancel`` is sent)."""
        while True:
            reply = store.reply_of(self.db, eid)
            if reply is not None:
                return reply
            await asyncio.sleep(POLL_SECONDS)

    # -- 2026-07-28: input-required results, durable across restarts -----------------------------------------

    async def _input_required(self, t: Turn, call: dict[str, Any], row: ToolRow, ir: InputRequired,
                              verdict: str = "run", reason: str = "") -> bool:
        """Store a round's questions with the call; True when the turn pauses for the person, False when
        the call was finished here (everything declined and sent again, or ended with an error)."""
        info = call.get("elicit") or {"round": 0, "asked": 0}
        round_no = int(info["round"]) + 1
        if ir.other:
            return self._elicit_error(t, call, row, "the server asked for sampling or roots, which Palui does not"
                                      " offer; the call was not finished")
        if round_no > MAX_ROUNDS:
            return self._elicit_error(t, call, row, f"the server asked again after {MAX_ROUNDS} rounds; the call"
                                      " was not finished")
        asked = int(info["asked"]) + len(ir.questions)
        limit = int(self.settings.get("mcp.max_elicitations_per_call"))
        ids = []
        for i, q in enumerate(ir.questions, start=1):
            why = (f"more than {limit} questions in one call (mcp.max_elicitations_per_call)" if asked > limit
                   else self._auto_decline(t, q, int(info["asked"]) + i))
            ids.append(self._store(t, call, row, q, "input_required", round_no, why)["id"])
        call["state"] = "eliciting"
        call["elicit"] = {"round": round_no, "asked": asked, "request_state": ir.request_state, "ids": ids,
                          "verdict": verdict, "reason": reason}
        self._save(t)
        if any(e["status"] == store.PENDING for e in store.for_ids(self.db, ids)):
            return True
        return await self._resume_elicited(t, call)

    def _elicit_error(self, t: Turn, call: dict[str, Any], row: ToolRow | None, why: str) -> bool:
        text = f"Error: {why}."
        call.update(state="done", result=text, is_error=True)
        call.pop("elicit", None)
        self._audit(t, call, row, "run", why, "error")
        self._emit(t, {"type": "tool_call", "tool": call["tool"], "args": call["args"], "verdict": "run",
                       "reason": why, "result": text, "is_error": True, "tainted": t.tainted})
        return False

    async def _resume_elicited(self, t: Turn, call: dict[str, Any]) -> bool:
        """Send a paused call again once every question of its round has a reply. True: still waiting."""
        info = call["elicit"]
        ids = list(info["ids"])
        replies: dict[str, Reply] = {}
        answered = []
        for e in store.for_ids(self.db, ids):
            reply = store.reply_of(self.db, e["id"])
            if reply is None:
                return True
            replies[e["key"]] = reply
            answered.append((e, reply))
        row = self._row(call["tool"])
        why = "the tool no longer exists" if row is None else redecide.refusal(
            self.db, call["tool"], t.origin.value, t.tainted, t.taint_source)
        if why or row is None:
            store.mark_sent(self.db, ids)
            return self._elicit_error(t, call, row, f"the call was not sent again: {why}")
        for e, reply in answered:
            self._audit_reply(t, call, row, e, reply)
        resume = Resume(replies=replies, request_state=info.get("request_state"))
        try:
            return await self._execute(t, call, row, info.get("verdict") or "run",
                                       info.get("reason") or "answers to the server's questions", resume=resume)
        finally:
            store.mark_sent(self.db, ids)

    async def _execute(self, t: Turn, call: dict[str, Any], row: ToolRow, verdict: str, reason: str,
                       approved: bool = False, resume: Resume | None = None) -> bool:
        raise NotImplementedError

    def _audit(self, t: Turn, call: dict[str, Any], row: ToolRow | None, verdict: str, reason: str, outcome: str,
               duration_ms: float | None = None) -> None:
        raise NotImplementedError
