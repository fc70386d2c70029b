"""Service API part: turns, approvals, stop, status and audit (SPEC §3-§6, §9, §11)."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

from palui.api.base import ServiceBase
from palui.connectors.hub import ConnectorHub
from palui.errors import ApprovalError, NotFound, UsageError
from palui.runner import approvals, audit, caps
from palui.runner import state as st
from palui.types import Origin, TurnStatus

EventSink = Callable[[dict[str, Any]], None]

RESUMABLE = (TurnStatus.AWAITING_APPROVAL,)


class TurnsAPI(ServiceBase):
    """Running, pausing and resuming governed turns."""

    def _setup(self) -> None:
        super()._setup()
        self.hub = ConnectorHub(self)  # type: ignore[arg-type]
        approvals.sweep(self.db)  # SPEC §5: expired approvals are swept on every start

    # -- starting and running turns ------------------------------------------------------------

    def new_conversation(self, origin: Origin = Origin.CHAT) -> str:
        cid = st.new_id("c")
        with self.db.write() as c:
            c.execute("INSERT INTO conversations (id, origin, created_at) VALUES (?,?,?)", (cid, origin.value, time.time()))
        return cid

    def start_turn(self, text: str, *, origin: Origin = Origin.CHAT, conversation: str | None = None,
                   model: str | None = None, job_id: str | None = None, webhook_id: str | None = None) -> str:
        """Create a turn (status ``queued``; it counts as a run when it is admitted). Returns the turn id.

        The turn starts tainted when its conversation is (SPEC §4: taint is sticky), and
        a webhook turn starts tainted by its payload.
        """
        if not isinstance(text, str) or not text.strip():
            raise UsageError("a turn needs a non-empty message")
        if conversation is None:
            conversation = self.new_conversation(origin)
        conv = self.db.one("SELECT * FROM conversations WHERE id = ?", (conversation,))
        if conv is None:
            raise NotFound(f"unknown conversation {conversation!r}")
        model = model or self.settings.model
        tid = st.new_id("t")
        now = time.time()
        tainted, source = bool(conv["tainted"]), conv["taint_source"]
        if tainted:
            source = f"earlier in this conversation: {source}"
        with self.db.write() as c:
            c.execute(
                "INSERT INTO turns (id, conversation_id, origin, status, input, model, tainted, taint_source, job_id,"
                " webhook_id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (tid, conversation, origin.value, TurnStatus.QUEUED.value, text, model, int(tainted), source, job_id,
                 webhook_id, now, now),
            )
        from pydantic_ai.messages import ModelRequest, UserPromptPart

        t = st.load(self.db, tid)
        assert t is not None
        t.messages = [ModelRequest(parts=[UserPromptPart(text)])]
        st.save(self.db, t)
        return tid

    def claim(self, turn_id: str, from_status: tuple[TurnStatus, ...] = (TurnStatus.QUEUED,)) -> tuple[bool, str | None]:
        """Claim a turn for this process (compare-and-set, SPEC §5). A queued turn is admitted
        by the caps in the same transaction (SPEC §6). Returns (claimed, cap that refused or None)."""
        if st.load(self.db, turn_id) is None:
            raise NotFound(f"unknown turn {turn_id!r}")
        if TurnStatus.QUEUED in from_status:
            claimed, cap = st.claim_new(self.db, turn_id, self._caps_verdict)
            if cap and cap != "job token cap":
                # Only a global cap pauses Palui; a job over its own cap is that job's matter.
                self._paused(cap)
            elif claimed:
                self._unpaused()
            if claimed or cap or from_status == (TurnStatus.QUEUED,):
                return claimed, cap
        return st.claim(self.db, turn_id, tuple(s for s in from_status if s is not TurnStatus.QUEUED)), None

    async def run_claimed(self, turn_id: str, on_event: EventSink | None = None,
                          drain: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Run a turn this process has claimed until it is done, paused or stopped."""
        from palui.runner.turn import TurnRunner  # imports the model library (slow): only when a turn runs

        runner = TurnRunner(self, on_event, drain=drain)  # type: ignore[arg-type]
        await runner.run(turn_id)
        return self.turn_result(turn_id, runner.run_events)

    async def run_turn(self, turn_id: str, on_event: EventSink | None = None,
                       from_status: tuple[TurnStatus, ...] = (TurnStatus.QUEUED,),
                       drain: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Claim and run a turn in this process. Returns :meth:`turn_result`.

        If the caps refuse a queued turn, it stays queued: the result has status
        ``queued``, ``queued_reason`` (the cap) and ``start_after`` (ISO time). If another
        process holds the turn, returns its current state without running it.
        """
        claimed, cap = self.claim(turn_id, from_status)
        if claimed:
            return await self.run_claimed(turn_id, on_event, drain)
        result = self.turn_result(turn_id, [])
        if cap:
            result["queued_reason"] = cap
            result["start_after"] = self.pause_state().get("paused_until") or caps.next_day(
                caps.zone(self.settings.get("caps.timezone")))
        return result

    def _caps_verdict(self, c, turn_row, now):
        return caps.verdict_in_tx(c, turn_row, now, self.settings, self.job_token_cap(turn_row["job_id"]))

    def job_token_cap(self, job_id: str | None) -> int | None:
        """A job's own daily token cap (``--token-cap``), or None for the ``caps.job_daily_tokens`` default."""
        if not job_id:
            return None
        import sqlite3

        try:
            r = self.db.one("SELECT token_cap FROM jobs WHERE id = ?", (job_id,))
        except sqlite3.OperationalError:  # no jobs table in this schema
            return None
        return int(r[0]) if r and r[0] else None

    def _paused(self, cap: str) -> None:
        """Tell the person once per pause (SPEC §6)."""
        with self.db.write() as c:
            r = c.execute("SELECT value FROM kv WHERE key = 'pause'").fetchone()
            if r and r[0] == cap:
                return
            c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES ('pause', ?)", (cap,))
        until = self.pause_state().get("paused_until")
        self.notify("cap", f"Palui is paused: the {cap} is reached. New turns wait"
                    + (f" until {until}." if until else "."))

    def _unpaused(self) -> None:
        if self.db.one("SELECT 1 FROM kv WHERE key = 'pause'"):
            with self.db.write() as c:
                c.execute("DELETE FROM kv WHERE key = 'pause'")

    async def send(self, text: str, *, conversation: str | None = None, model: str | None = None,
                   origin: Origin = Origin.CHAT, on_event: EventSink | None = None) -> dict[str, Any]:
        """Start a turn and run it here: the ``palui run`` path."""
        tid = self.start_turn(text, origin=origin, conversation=conversation, model=model)
        return await self.run_turn(tid, on_event)

    def turn_result(self, turn_id: str, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The ``palui run --json`` shape: ``{"status","answer","conversation","turn","events","usage",…}``."""
        t = st.load(self.db, turn_id)
        if t is None:
            raise NotFound(f"unknown turn {turn_id!r}")
        pending = [approvals.as_dict(r) for r in
                   self.db.all("SELECT * FROM approvals WHERE turn_id = ? AND status = 'pending'", (turn_id,))]
        return {
            "status": t.status.value if t.status is not TurnStatus.RUNNING else "running",
            "answer": t.answer, "conversation": t.conversation_id, "turn": t.id, "origin": t.origin.value,
            "events": events if events is not None else t.events,
            "usage": {"steps": t.steps, "seconds": round(t.seconds, 3), "input_tokens": t.input_tokens,
                      "output_tokens": t.output_tokens, "tokens": t.tokens},
            "tainted": t.tainted, "taint_source": t.taint_source, "error": t.error, "budget": t.budget_hit,
            "pending_approvals": pending,
        }

    # -- approvals ---------------------------------------------------------------------------------

    def approvals(self, status: str | None = "pending") -> list[dict[str, Any]]:
        """Approvals, newest last; ``status=None`` lists all."""
        approvals.sweep(self.db)
        if status:
            rows = self.db.all("SELECT * FROM approvals WHERE status = ? ORDER BY created_at", (status,))
        else:
            rows = self.db.all("SELECT * FROM approvals ORDER BY created_at")
        return [approvals.as_dict(r) for r in rows]

    def tool_or_none(self, name: str):
        """The stored tool named ``name`` or None (audit rows name its class when it still exists)."""
        from palui.store import tools as tools_store

        return tools_store.get_tool(self.db, name)

    def approval(self, approval_id: str) -> dict[str, Any]:
        """One approval (``palui approvals show``). Raises NotFound."""
        approvals.sweep(self.db)
        return approvals.get(self.db, approval_id)

    async def answer_approval(self, approval_id: str, approve: bool,
                              on_event: EventSink | None = None) -> dict[str, Any]:
        """Approve or deny, then resume the turn here if no other process does (SPEC §5).

        An approval that expired counts as a denial: the turn goes on (here, if no other
        process takes it) and the answer is still refused with ApprovalError.

        Raises NotFound, ApprovalError (expired, already answered, cancelled).
        """
        try:
            a = approvals.answer(self.db, approval_id, approve)
        except ApprovalError:
            row = self.db.one("SELECT turn_id, status FROM approvals WHERE id = ?", (approval_id,))
            if row is not None and row["status"] == "expired":
                r = await self.run_turn(row["turn_id"], on_event, from_status=RESUMABLE)
                raise ApprovalError(f"approval {approval_id} expired, which counts as a denial; the turn went on"
                                    f" ({r['status']}{': ' + r['answer'] if r.get('answer') else ''})") from None
            raise
        return await self.run_turn(a["turn"], on_event, from_status=RESUMABLE)

    async def resume_ready(self, on_event: EventSink | None = None) -> list[dict[str, Any]]:
        """Resume turns that no process is running but that can go on: their approval was
        answered or expired, or the process running them died (kill -9, a crash). Used where
        no service runs (the service does this on every tick)."""
        approvals.sweep(self.db)
        st.recover_orphans(self.db)
        out = []
        for tid in st.answered_turn_ids(self.db):
            out.append(await self.run_turn(tid, on_event, from_status=RESUMABLE))
        # Recovered orphans are queued and already counted as runs: take them up again.
        for r in self.db.all("SELECT t.id FROM turns t WHERE t.status = 'queued' AND EXISTS"
                             " (SELECT 1 FROM runs x WHERE x.turn_id = t.id) ORDER BY t.created_at"):
            out.append(await self.run_turn(r["id"], on_event))
        return out

    # -- stop ------------------------------------------------------------------------------------------

    def stop(self, conversation: str | None = None, turn: str | None = None) -> list[str]:
        """``/stop``: cancel the conversation's running, awaiting-approval or queued turn (SPEC §5).

        A running turn (in any process) is asked to stop at its next boundary; a paused
        or queued one is stopped now and its pending approvals cancelled. Returns the
        turn ids acted on.
        """
        if turn:
            rows = self.db.all("SELECT * FROM turns WHERE id = ?", (turn,))
        elif conversation:
            rows = self.db.all("SELECT * FROM turns WHERE conversation_id = ? AND status IN"
                               " ('running','awaiting_approval','queued')", (conversation,))
        else:
            raise UsageError("stop needs a conversation or a turn")
        if turn and not rows:
            raise NotFound(f"unknown turn {turn!r}")
        acted = []
        now = time.time()
        for r in rows:
            orphan = r["status"] == "running" and not st.owner_alive(r["owner"])
            with self.db.write() as c:
                if r["status"] in ("awaiting_approval", "queued") or orphan:
                    # Nobody runs it (paused, queued, or its process died): stop it here.
                    cur = c.execute("UPDATE turns SET status='stopped', error='stopped by the person', pending_json=NULL,"
                                    " updated_at=? WHERE id=? AND status=? AND version=?",
                                    (now, r["id"], r["status"], r["version"]))
                    if cur.rowcount:
                        c.execute("UPDATE approvals SET status='cancelled', answered_at=? WHERE turn_id=? AND"
                                  " status='pending'", (now, r["id"]))
                        acted.append(r["id"])
                        in_flight = [x for x in json.loads(r["pending_json"] or "[]") if x.get("state") == "sent"]
                    else:
                        in_flight = []
                else:
                    in_flight = []
                    cur = c.execute("UPDATE turns SET stop_requested=1 WHERE id=? AND status='running'", (r["id"],))
                    if cur.rowcount:
                        acted.append(r["id"])
            for call in in_flight:
                tool = self.tool_or_none(call["tool"])
                audit.record(self.db, turn_id=r["id"], tool=call["tool"],
                             tool_class=tool.tool_class.value if tool else None,
                             class_source=tool.class_source.value if tool else None,
                             origin=r["origin"], tainted=bool(r["tainted"]), verdict="run",
                             reason="stopped after the process running the call ended",
                             args_hash=approvals.args_hash(call["args"]), outcome="cancelled; may have run")
        return acted

    # -- status and audit ------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``{"model","tokens_today","caps","runs_last_hour","paused","paused_reason","paused_until",
        "connectors","pending_approvals"}`` (SPEC §8 /status)."""
        tz = caps.zone(self.settings.get("caps.timezone"))
        approvals.sweep(self.db)
        conns = []
        for c in self.connectors():  # type: ignore[attr-defined]
            live = self.hub.state(c["id"])
            conns.append({"id": c["id"], "state": live or c["state"], "tools": c["tools"],
                          "enabled_tools": c["enabled_tools"]})
        pause = self.pause_state()
        return {
            "model": self.settings.model,
            "tokens_today": caps.tokens_today(self.db, tz),
            "caps": {"daily_tokens": self.settings.get("caps.daily_tokens"),
                     "job_daily_tokens": self.settings.get("caps.job_daily_tokens"),
                     "runs_per_hour": self.settings.get("caps.runs_per_hour"),
                     "timezone": self.settings.get("caps.timezone") or "system"},
            "runs_last_hour": caps.runs_last_hour(self.db),
            **pause,
            "connectors": conns,
            "pending_approvals": len(self.db.all("SELECT 1 FROM approvals WHERE status = 'pending'")),
        }

    def pause_state(self) -> dict[str, Any]:
        """Whether a global cap pauses new turns: ``{"paused","paused_reason","paused_until"}``."""
        tz = caps.zone(self.settings.get("caps.timezone"))
        if caps.tokens_today(self.db, tz) >= int(self.settings.get("caps.daily_tokens")):
            return {"paused": True, "paused_reason": "daily token cap", "paused_until": caps.next_day(tz)}
        runs = caps.runs_last_hour(self.db)
        if runs >= int(self.settings.get("caps.runs_per_hour")):
            return {"paused": True, "paused_reason": "runs per hour cap",
                    "paused_until": caps.window_frees_at(self.db, int(self.settings.get("caps.runs_per_hour")))}
        return {"paused": False, "paused_reason": None, "paused_until": None}

    def audit(self, turn: str | None = None, limit: int = 500) -> list[dict[str, Any]]:
        return audit.rows(self.db, turn, limit)
