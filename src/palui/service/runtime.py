"""The service's turn tasks and, under ``palui serve``, its background tick.

Part of the service, not a front end. One :class:`Runtime` per service object. Every turn
this process runs is an asyncio task registered here (:meth:`Runtime.launch`), so a front
end can follow its events (:meth:`subscribe`) and the drain at shutdown can wait for it.

With :meth:`start` (``palui serve``), every second (``tick_seconds``) it sweeps expired
approvals, queues again turns left ``running`` by a process that is gone (kill -9), resumes
turns whose approval was answered anywhere, starts queued turns while the caps and the
one-turn-per-conversation rule allow (SPEC §6, §8; FIFO per kind of cap, so webhook turns held
by their share never block a chat turn, issue 10 §3), prunes a small batch of what
``retention.days`` no longer keeps, and calls the tickers (the job scheduler). On shutdown it
drains: turns in flight stop at their next step boundary and stay resumable (they go back to
``queued`` and the next start picks them up).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from palui.policy.caps import JOB_TOKENS, WEBHOOK_RUNS_PER_HOUR
from palui.types import Origin, TurnStatus

if TYPE_CHECKING:
    import asyncio

    from palui.service import Service
    from palui.service.core import ServiceCore

log = logging.getLogger(__name__)

Ticker = Callable[[float], Awaitable[None]]
EventSink = Callable[[dict[str, Any]], None]


class Runtime:
    """Turn tasks of one service (and its tick under ``palui serve``)."""

    def __init__(self, svc: ServiceCore, tick_seconds: float = 1.0) -> None:
        self._svc = svc
        self.tick_seconds = tick_seconds
        self.tasks: dict[str, asyncio.Task] = {}
        self.listeners: dict[str, list[asyncio.Queue[dict[str, Any] | None]]] = {}
        # The stored events (those with a ``seq``) each running task has sent so far: a late subscriber
        # gets them first, so it misses none that are not yet saved (:meth:`subscribe_from`).
        self.backlog: dict[str, list[dict[str, Any]]] = {}
        self.tickers: list[Ticker] = []
        self.draining = False
        self._loop_task: asyncio.Task | None = None
        self.on_shutdown: list[Callable[[], None]] = []  # run last, e.g. removing serve.json

    @property
    def svc(self) -> Service:
        return self._svc  # type: ignore[return-value]  # the core that made the runtime is always a Service

    # -- lifecycle (palui serve) ---------------------------------------------------------------

    async def start(self, tick_seconds: float | None = None) -> None:
        """Start the tick loop. Raises ConfigError for a bad ``PALUI_TEST_CLOCK``."""
        if tick_seconds is not None:
            self.tick_seconds = tick_seconds
        import asyncio  # (only a process that runs turns needs the event loop's module)

        self.install_tickers()
        self._loop_task = asyncio.create_task(self._loop())

    def install_tickers(self) -> None:
        """Register the job scheduler's tick and the daily post of the audit head (once). Raises
        ConfigError for a bad ``PALUI_TEST_CLOCK``."""
        from palui.service.audit_log import AuditHeadPost
        from palui.service.scheduler import Scheduler
        from palui.triggers import clock

        clock.now()  # a bad test clock refuses to start
        if not self.tickers:
            self.tickers.append(Scheduler(self.svc).tick)
            self.tickers.append(AuditHeadPost(self.svc).tick)

    async def shutdown(self, grace_seconds: float = 30.0) -> None:
        """Drain: no new work; turns in flight pause at their next step boundary."""
        import asyncio

        self.draining = True
        if self._loop_task:
            self._loop_task.cancel()
        pending = [t for t in self.tasks.values() if not t.done()]
        if pending:
            _done, still = await asyncio.wait(pending, timeout=grace_seconds)
            for t in still:
                t.cancel()
        await self.svc.close()
        for fn in self.on_shutdown:
            try:
                fn()
            except Exception:
                log.exception("shutdown hook failed")

    async def _loop(self) -> None:
        import asyncio

        while not self.draining:
            try:
                await self.tick(time.time())
            except Exception:  # one bad tick must not stop the service
                log.exception("service tick failed")
            await asyncio.sleep(self.tick_seconds)

    async def tick(self, now: float) -> None:
        """One round of background work (see the module docstring)."""
        from palui.runner import approvals, state  # imported by the tick, not by every CLI start

        db = self.svc.db
        approvals.sweep(db, now)
        self.svc.redecide_approvals()  # a change made by another process (the CLI) is seen here too
        for tid in state.recover_orphans(db, now):
            log.warning("turn %s was left running by a process that is gone: queued again", tid)
        for tid in state.answered_turn_ids(db):
            self.svc.launch(tid, (TurnStatus.AWAITING_APPROVAL,))
        self._start_queued(db)
        self.svc.prune_expired(now)  # retention.days, a small batch per tick (issue 11)
        for ticker in list(self.tickers):
            try:
                await ticker(now)
            except Exception:
                log.exception("ticker failed")

    def _start_queued(self, db) -> None:
        """Start queued turns oldest first, FIFO per kind of cap (SPEC §6; issue 10 §3): a global cap
        (daily tokens, runs per hour) holds every later turn; the webhook share holds only later
        webhook turns, and a job's own token cap only that job's turns, so a flood of held webhook
        turns never blocks a chat message or a job queued behind it."""
        webhooks_held = False
        jobs_held: set[str] = set()
        for r in db.all("SELECT id, origin, job_id FROM turns WHERE status = 'queued' ORDER BY rowid"):
            if r["id"] in self.tasks or r["job_id"] in jobs_held:
                continue
            if webhooks_held and r["origin"] == Origin.WEBHOOK.value:
                continue
            launched = self.svc.launch(r["id"], (TurnStatus.QUEUED,))
            if launched.cap == WEBHOOK_RUNS_PER_HOUR:
                webhooks_held = True
            elif launched.cap == JOB_TOKENS and r["job_id"]:
                jobs_held.add(r["job_id"])
            elif launched.cap:
                break  # a global cap holds: later turns wait too (FIFO)

    # -- turn tasks ------------------------------------------------------------------------------

    def _fanout(self, turn_id: str, extra: EventSink | None) -> EventSink:
        def send(event: dict[str, Any]) -> None:
            if "seq" in event:
                self.backlog.setdefault(turn_id, []).append(event)
            for q in self.listeners.get(turn_id, []):
                q.put_nowait(event)
            if extra is not None:
                extra(event)

        return send

    def launch(self, turn_id: str, on_event: EventSink | None = None) -> asyncio.Task | None:
        """Run a turn this process has already claimed, in a task of the running loop.
        Returns None while draining (the turn stays claimable by the next start)."""
        if self.draining:
            return None
        import asyncio

        async def go() -> dict[str, Any]:
            try:
                return await self.svc.run_claimed(turn_id, self._fanout(turn_id, on_event),
                                                  drain=lambda: self.draining)
            finally:
                self.backlog.pop(turn_id, None)
                for q in self.listeners.get(turn_id, []):
                    q.put_nowait(None)

        task = asyncio.create_task(go())
        self.tasks[turn_id] = task
        task.add_done_callback(lambda _t: self.tasks.pop(turn_id, None) if self.tasks.get(turn_id) is _t else None)
        return task

    def subscribe(self, turn_id: str) -> asyncio.Queue[dict[str, Any] | None]:
        """A queue that receives the turn's events as they happen, then ``None`` when its task ends."""
        import asyncio

        q: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.listeners.setdefault(turn_id, []).append(q)
        return q

    def subscribe_from(self, turn_id: str) -> tuple[list[dict[str, Any]], asyncio.Queue[dict[str, Any] | None]]:
        """(the stored events the turn's running task has sent so far, a queue of what follows); taken
        together, with no await between, so nothing falls in the gap."""
        return list(self.backlog.get(turn_id, [])), self.subscribe(turn_id)

    def unsubscribe(self, turn_id: str, q: asyncio.Queue[dict[str, Any] | None]) -> None:
        qs = self.listeners.get(turn_id, [])
        if q in qs:
            qs.remove(q)
        if not qs:
            self.listeners.pop(turn_id, None)
