"""Service part: following a turn and waiting for an approval's answer, from any process
(docs/decisions/0119-following-the-truth.md).

A chat shows the truth wherever it was decided: a turn's continuation after an approval answered
on the web page or in another terminal, an approval answered or cancelled elsewhere, a message
that waited behind another turn. :meth:`LivePart.follow` hands a turn's events to a front end
as they happen — the stored events, whichever process runs the turn (read from the database), and,
while this process runs it, the live pieces too (streamed text, ``tool_start``);
:meth:`LivePart.wait_approval` returns once an approval is no longer pending.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, cast

from palui.runner import approvals
from palui.runner import state as st
from palui.service.approvals import ApprovalsPart
from palui.service.status import StatusPart
from palui.service.turn_tasks import EventSink, TurnTasks
from palui.service.turns import TurnsPart
from palui.store.db import Database
from palui.types import TurnStatus

if TYPE_CHECKING:
    from palui.results import Approval, TurnEvent, TurnResult

if TYPE_CHECKING:  # asyncio is imported where a coroutine needs it: light commands do not pay for it (start cost)
    import asyncio

#: Statuses a followed turn ends at (``awaiting_approval`` only while an approval is pending).
SETTLED = ("done", "stopped", "budget", "error", "partial", "failed")
POLL_SECONDS = 0.2


class LivePart:
    """Following turns and approvals as they change.

    Args:
        db: the database (stored events, turns, approvals).
        turn_tasks: the turns this process runs, and their live events.
        turns_part: a turn's result, and taking a turn up here.
        status_part: the pause state a turn held by a cap waits on.
        approvals_part: an approval as it is now.
    """

    def __init__(self, db: Database, turn_tasks: TurnTasks, turns_part: TurnsPart, status_part: StatusPart,
                 approvals_part: ApprovalsPart) -> None:
        self.db = db
        self.turn_tasks = turn_tasks
        self.turns_part = turns_part
        self.status_part = status_part
        self.approvals_part = approvals_part

    def subscribe(self, turn_id: str) -> asyncio.Queue[TurnEvent | None]:
        """A queue of the turn's events as it runs in this process, then ``None`` when its task ends
        (:meth:`palui.service.turn_tasks.TurnTasks.subscribe`)."""
        return self.turn_tasks.subscribe(turn_id)

    def unsubscribe(self, turn_id: str, q: asyncio.Queue[TurnEvent | None]) -> None:
        """Stop sending the turn's events to ``q`` (a queue from :meth:`subscribe`)."""
        self.turn_tasks.unsubscribe(turn_id, q)

    def events(self, turn_id: str, after: int = 0) -> list[TurnEvent]:
        """The turn's stored events from index ``after`` on (each has its ``seq``), oldest first."""
        rows = self.db.all("SELECT seq, event FROM turn_events WHERE turn_id = ? AND seq >= ? ORDER BY seq",
                           (turn_id, after))
        # Stored by the runner's TurnEvents.emit, read back as they were written.
        return [cast("TurnEvent", {**json.loads(r["event"]), "seq": r["seq"]}) for r in rows]

    async def follow(self, turn_id: str, after: int = 0, on_event: EventSink | None = None, *,
                     take_up: bool = False, poll: float = POLL_SECONDS) -> TurnResult:
        """Hand the turn's events from index ``after`` on to ``on_event`` until it settles: it ended
        (done, stopped, budget, error), waits for a pending approval or server's question, or (with
        ``take_up``) waits for a cap. Returns :meth:`TurnsPart.result` then.

        ``take_up`` is for a process without a live service (the CLI): a turn no process runs but
        that can go on is run here — queued and admitted by the caps and the one-turn rule, left
        running by a process that died, or paused for an approval that was answered. The service
        itself follows without it (its tick takes turns up). Raises NotFound.
        """
        import asyncio

        emit = on_event or (lambda _e: None)
        self.turns_part.result(turn_id, [])  # NotFound for an unknown turn
        q: asyncio.Queue[TurnEvent | None] | None = None

        def show(e: TurnEvent) -> None:
            nonlocal after
            if "seq" not in e:
                emit(e)  # a live piece: streamed text, a tool starting
            elif e["seq"] >= after:
                emit(e)
                after = e["seq"] + 1

        try:
            while True:
                if q is not None:
                    # While this process runs the turn, its events come in order from the task; its end
                    # (None) sends the loop back to the database for anything saved last.
                    live = await q.get()
                    if live is None:
                        self.turn_tasks.unsubscribe(turn_id, q)
                        q = None
                    else:
                        show(live)
                    continue
                # What is stored, then (in the same synchronous block) what the task here sends next.
                for e in self.events(turn_id, after):
                    show(e)
                task = self.turn_tasks.tasks.get(turn_id)
                if task is not None and not task.done():
                    backlog, q = self.turn_tasks.subscribe_from(turn_id)
                    for e in backlog:
                        show(e)
                    continue
                row = self.db.one("SELECT status, owner FROM turns WHERE id = ?", (turn_id,))
                assert row is not None  # turns are never deleted
                status = row["status"]
                pending = status == "awaiting_approval" and self.db.one(  # an approval or a server's question
                    "SELECT 1 FROM approvals WHERE turn_id = ? AND status = 'pending' UNION ALL"
                    " SELECT 1 FROM elicitations WHERE turn_id = ? AND status = 'pending'",
                    (turn_id, turn_id)) is not None
                if status in SETTLED or pending:
                    return self.turns_part.result(turn_id)
                if take_up:
                    result = self._take_up(turn_id, status, row["owner"])
                    if result is not None:
                        return result
                    if turn_id in self.turn_tasks.tasks:
                        continue  # taken up here: subscribe at the top of the loop
                await asyncio.sleep(poll)
        finally:
            if q is not None:
                self.turn_tasks.unsubscribe(turn_id, q)

    def _take_up(self, turn_id: str, status: str, owner: str | None) -> TurnResult | None:
        """Start here a turn nobody runs (see :meth:`follow`). Returns the result to stop
        following with (a cap keeps it queued), else None (started here, or left to its runner)."""
        if status == "running":
            if st.owner_alive(owner):
                return None
            st.recover_orphans(self.db)  # its process died: back to queued, taken up below next time
            return None
        if status == "awaiting_approval" and turn_id not in st.answered_turn_ids(self.db):
            return None
        launched = self.turns_part.launch(turn_id, (TurnStatus.QUEUED, TurnStatus.AWAITING_APPROVAL))
        if launched.cap:
            result = self.turns_part.result(turn_id)
            result["queued_reason"] = launched.cap
            result["start_after"] = self.status_part.pause_state().get("paused_until")
            return result
        return None

    async def wait_approval(self, approval_id: str, timeout: float = 25.0,
                            poll: float = POLL_SECONDS) -> Approval:
        """Wait up to ``timeout`` seconds for the approval to be answered, cancelled or to expire,
        wherever that happens (another terminal, the web page, a chat app, ``palui stop``). Returns
        the approval (:meth:`ApprovalsPart.get`: ``status``, ``answered_via``, ``cancel_reason``), pending
        when the time ran out. Raises NotFound."""
        import asyncio

        end = time.monotonic() + max(0.0, timeout)
        while True:
            now_status = approvals.status(self.db, approval_id)
            if now_status is None or now_status != "pending" or time.monotonic() >= end:
                return self.approvals_part.get(approval_id)  # sweeps an expired one; NotFound when unknown
            await asyncio.sleep(poll)
