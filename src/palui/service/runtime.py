"""The service's background under ``palui serve``: the tick, its tickers, and the drain at shutdown.

Part of the service, not a front end; the top of the parts (nothing holds a reference to it but
the service object). The turn tasks it waits for are :class:`~palui.service.turn_tasks.TurnTasks`.

With :meth:`Runtime.start` (``palui serve``), every second (``tick_seconds``) it sweeps expired
approvals when the kept next expiry has passed (:class:`~palui.runner.expiry_sweep.ExpirySweep`), queues
again turns left ``running`` by a process that is gone (kill -9), resumes turns whose approval
was answered anywhere, starts queued turns while the caps and the one-turn-per-conversation rule
allow (spec §6, §8; FIFO per kind of cap, so webhook turns held by their share never block a chat
turn, spec §6.5), prunes a small batch of what ``retention.days`` no longer keeps, and calls the
tickers (the job scheduler, the daily post of the audit head). On shutdown it drains: turns in
flight stop at their next step boundary and stay resumable (they go back to ``queued`` and the
next start picks them up).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from palui.connectors.hub import ConnectorHub
from palui.policy.caps import JOB_TOKENS, WEBHOOK_RUNS_PER_HOUR
from palui.runner.expiry_sweep import ExpirySweep
from palui.service.clock import Clock
from palui.service.maintenance import MaintenancePart
from palui.service.turn_tasks import TurnTasks
from palui.service.turns import TurnsPart
from palui.store.db import Database
from palui.types import Origin, TurnStatus

if TYPE_CHECKING:
    import asyncio

    from palui.results import TurnResult

log = logging.getLogger(__name__)

Ticker = Callable[[float], Awaitable[None]]


class Runtime:
    """The tick of one service under ``palui serve``, and its drain.

    Args:
        db, hub, clock: the service's shared collaborators (the hub's connectors close at shutdown).
        turn_tasks: the turn tasks of this process (drained at shutdown).
        turns_part: launches turns that can go on.
        maintenance_part: prunes what ``retention.days`` no longer keeps.
        redecide: re-decides pending approvals each tick (a change made by another process).
        tickers: called each tick once installed (:meth:`install_tickers`), in this order.
        tick_seconds: seconds between ticks.
        before_start: called by :meth:`start` before anything starts (the service checks the pinned policy
            file there: :meth:`palui.service.policy.PolicyPart.enforce_file`).
    """

    def __init__(self, db: Database, hub: ConnectorHub, clock: Clock, turn_tasks: TurnTasks, turns_part: TurnsPart,
                 maintenance_part: MaintenancePart, redecide: Callable[[], object], tickers: Sequence[Ticker],
                 tick_seconds: float = 1.0, before_start: Callable[[], object] = lambda: None) -> None:
        self.db = db
        self.hub = hub
        self.clock = clock
        self.turn_tasks = turn_tasks
        self.turns_part = turns_part
        self.maintenance_part = maintenance_part
        self.redecide = redecide
        self._tickers = tuple(tickers)
        self.tick_seconds = tick_seconds
        self.tickers: list[Ticker] = []  # installed: called each tick
        self._loop_task: asyncio.Task[None] | None = None
        self.shutdown_hooks: list[Callable[[], None]] = []  # run last, e.g. removing serve.json
        self.expiry = ExpirySweep(db)
        self._before_start = before_start

    @property
    def tasks(self) -> dict[str, asyncio.Task[TurnResult]]:
        """Turn id → the task running it in this process (:attr:`TurnTasks.tasks`)."""
        return self.turn_tasks.tasks

    # -- lifecycle (palui serve) ---------------------------------------------------------------

    async def start(self, tick_seconds: float | None = None) -> None:
        """``palui serve``: the start hook first (the policy file checked), then the tick loop (resumes,
        queued turns, the tickers). Raises ConfigError for a bad ``PALUI_TEST_CLOCK``."""
        self._before_start()
        if tick_seconds is not None:
            self.tick_seconds = tick_seconds
        import asyncio  # (only a process that runs turns needs the event loop's module)

        self.install_tickers()
        self._loop_task = asyncio.create_task(self._loop())

    def install_tickers(self) -> None:
        """Register the tickers (the job scheduler's tick, the daily post of the audit head), once. Raises
        ConfigError for a bad ``PALUI_TEST_CLOCK``."""
        self.clock.scheduler_now()  # a bad test clock refuses to start
        if not self.tickers:
            self.tickers.extend(self._tickers)

    def begin_drain(self) -> None:
        """Refuse new work now (a signal arrived); :meth:`shutdown` finishes the drain."""
        self.turn_tasks.draining = True

    def on_shutdown(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` last when the background stops (e.g. removing ``serve.json``)."""
        self.shutdown_hooks.append(fn)

    async def shutdown(self, grace_seconds: float = 30.0) -> None:
        """Drain and stop: no new work; turns in flight pause at their next step boundary, connectors close."""
        import asyncio

        self.turn_tasks.draining = True
        if self._loop_task:
            self._loop_task.cancel()
        pending = [t for t in self.turn_tasks.tasks.values() if not t.done()]
        if pending:
            _done, still = await asyncio.wait(pending, timeout=grace_seconds)
            for t in still:
                t.cancel()
        await self.hub.close()
        for fn in self.shutdown_hooks:
            try:
                fn()
            except Exception:
                log.exception("shutdown hook failed")

    async def _loop(self) -> None:
        import asyncio

        while not self.turn_tasks.draining:
            try:
                await self.tick(self.clock.now())
            except Exception:  # one bad tick must not stop the service
                log.exception("service tick failed")
            await asyncio.sleep(self.tick_seconds)

    async def tick(self, now: float) -> None:
        """One round of background work (see the module docstring)."""
        from palui.runner import state  # imported by the tick, not by every CLI start

        db = self.db
        self.expiry.tick(now)  # when the kept next expiry passed or something new is pending (spec §5.2)
        self.redecide()  # a change made by another process (the CLI) is seen here too
        for tid in state.recover_orphans(db, now):
            log.warning("turn %s was left running by a process that is gone: queued again", tid)
        for tid in state.answered_turn_ids(db):
            self.turns_part.launch(tid, (TurnStatus.AWAITING_APPROVAL,))
        self._start_queued(db)
        # retention.days, a small batch per tick (docs/decisions/0086-retention.md)
        self.maintenance_part.prune_expired(now)
        for ticker in list(self.tickers):
            try:
                await ticker(now)
            except Exception:
                log.exception("ticker failed")

    def _start_queued(self, db: Database) -> None:
        """Start queued turns oldest first, FIFO per kind of cap (spec §6.5): a global cap
        (daily tokens, runs per hour) holds every later turn; the webhook share holds only later
        webhook turns, and a job's own token cap only that job's turns, so a flood of held webhook
        turns never blocks a chat message or a job queued behind it."""
        webhooks_held = False
        jobs_held: set[str] = set()
        for r in db.all("SELECT id, origin, job_id FROM turns WHERE status = 'queued' ORDER BY rowid"):
            if r["id"] in self.turn_tasks.tasks or r["job_id"] in jobs_held:
                continue
            if webhooks_held and r["origin"] == Origin.WEBHOOK.value:
                continue
            launched = self.turns_part.launch(r["id"], (TurnStatus.QUEUED,))
            if launched.cap == WEBHOOK_RUNS_PER_HOUR:
                webhooks_held = True
            elif launched.cap == JOB_TOKENS and r["job_id"]:
                jobs_held.add(r["job_id"])
            elif launched.cap:
                break  # a global cap holds: later turns wait too (FIFO)
