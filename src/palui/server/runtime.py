"""The service's background work: running turns as tasks, the queue, resumes, tickers.

One :class:`Runtime` per ``palui serve`` process. Every second (``tick_seconds``) it
sweeps expired approvals, queues again turns left ``running`` by a process that is gone
(kill -9), resumes turns whose approval was answered elsewhere, starts
queued turns while the caps allow (SPEC §6), and calls the registered tickers (the job
scheduler). On shutdown it drains: turns in flight stop at their next step boundary
and stay resumable (they go back to ``queued`` and the next start picks them up).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable

from palui.runner import approvals
from palui.runner import state
from palui.types import TurnStatus

log = logging.getLogger(__name__)

Ticker = Callable[[float], Awaitable[None]]


class Runtime:
    """Background tasks of the service. ``svc`` is the :class:`~palui.service.Service`."""

    def __init__(self, svc: Any, tick_seconds: float = 1.0) -> None:
        self.svc = svc
        self.tick_seconds = tick_seconds
        self.tasks: dict[str, asyncio.Task] = {}
        self.listeners: dict[str, list[asyncio.Queue]] = {}
        self.tickers: list[Ticker] = []
        self.draining = False
        self._loop_task: asyncio.Task | None = None
        self.on_shutdown: list[Callable[[], None]] = []  # run last, e.g. removing serve.json

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop())

    async def shutdown(self, grace_seconds: float = 30.0) -> None:
        """Drain: no new work; turns in flight pause at their next step boundary."""
        self.draining = True
        if self._loop_task:
            self._loop_task.cancel()
        pending = [t for t in self.tasks.values() if not t.done()]
        if pending:
            done, still = await asyncio.wait(pending, timeout=grace_seconds)
            for t in still:
                t.cancel()
        await self.svc.hub.close()
        for fn in self.on_shutdown:
            try:
                fn()
            except Exception:
                log.exception("shutdown hook failed")

    async def _loop(self) -> None:
        while not self.draining:
            try:
                await self.tick(time.time())
            except Exception:  # one bad tick must not stop the service
                log.exception("service tick failed")
            await asyncio.sleep(self.tick_seconds)

    async def tick(self, now: float) -> None:
        approvals.sweep(self.svc.db, now)
        for tid in state.recover_orphans(self.svc.db, now):
            log.warning("turn %s was left running by a process that is gone: queued again", tid)
        for tid in state.answered_turn_ids(self.svc.db):
            self.start_turn(tid, (TurnStatus.AWAITING_APPROVAL,))
        for r in self.svc.db.all("SELECT id FROM turns WHERE status = 'queued' ORDER BY created_at"):
            if r["id"] in self.tasks:
                continue
            _task, cap = self.start_turn(r["id"], (TurnStatus.QUEUED,))
            if cap:
                break  # a cap holds: later turns wait too (FIFO)
        for ticker in list(self.tickers):
            try:
                await ticker(now)
            except Exception:
                log.exception("ticker failed")

    # -- running turns -------------------------------------------------------------------------

    def _fanout(self, turn_id: str) -> Callable[[dict[str, Any]], None]:
        def send(event: dict[str, Any]) -> None:
            for q in self.listeners.get(turn_id, []):
                q.put_nowait(event)

        return send

    def launch(self, turn_id: str) -> asyncio.Task | None:
        """Run a turn this process has already claimed, in a task."""
        if self.draining:
            return None

        async def go() -> dict[str, Any]:
            try:
                return await self.svc.run_claimed(turn_id, self._fanout(turn_id), drain=lambda: self.draining)
            finally:
                for q in self.listeners.get(turn_id, []):
                    q.put_nowait(None)

        task = asyncio.create_task(go())
        self.tasks[turn_id] = task
        task.add_done_callback(lambda _t: self.tasks.pop(turn_id, None) if self.tasks.get(turn_id) is _t else None)
        return task

    def start_turn(self, turn_id: str, from_status: tuple[TurnStatus, ...]) -> tuple[asyncio.Task | None, str | None]:
        """Claim (admitting a new turn against the caps) and launch. Returns (task, cap that refused)."""
        if self.draining:
            return None, None
        claimed, cap = self.svc.claim(turn_id, from_status)
        if not claimed:
            return self.tasks.get(turn_id), cap
        return self.launch(turn_id), None

    def subscribe(self, turn_id: str) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue()
        self.listeners.setdefault(turn_id, []).append(q)
        return q

    def unsubscribe(self, turn_id: str, q: asyncio.Queue) -> None:
        qs = self.listeners.get(turn_id, [])
        if q in qs:
            qs.remove(q)
        if not qs:
            self.listeners.pop(turn_id, None)
