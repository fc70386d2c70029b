"""Awaiting a model request or a tool call within the turn's time, cancelled by ``/stop`` (spec §5, §6).

:class:`StopGuard` is held by the runner and by the call sender. The stop flag is stored with the turn
(``turns.stop_requested``), so a stop asked in another process is seen within :data:`STOP_POLL` seconds.
A wait for the person inside the call (a server's question, spec §7) moves the deadline: the guard asks
the turn's clock how long the person was waited for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from palui.runner import state as st
from palui.store.db import Database

T = TypeVar("T")
STOP_POLL = 0.25  # seconds between checks for a stop requested by another process


class StopRequested(Exception):
    """``/stop`` was asked for this turn (by any process)."""


class StopGuard:
    """Runs one awaitable of a turn under its deadline and its stop flag.

    Args:
        db: the database holding the turn's stop flag.
        paused_total: seconds the run has waited for the person so far (:meth:`TurnClock.paused_total`).
        stopped: whether the turn ``turn_id`` must stop now (default: its stop flag; a gateway call also stops
            when the emergency brake pauses the gateway, spec §5.7).
    """

    def __init__(self, db: Database, paused_total: Callable[[], float],
                 stopped: Callable[[str], bool] | None = None) -> None:
        self._db = db
        self._paused_total = paused_total
        self._stopped = stopped or (lambda turn_id: st.stop_requested(db, turn_id))

    async def run(self, turn_id: str, coro: Awaitable[T], timeout: float) -> T:
        """Await ``coro`` within ``timeout`` seconds (plus any wait for the person meanwhile), cancelling it
        promptly if a stop is requested for ``turn_id``.

        Raises:
            TimeoutError: the time ran out (``coro`` is cancelled).
            StopRequested: a stop was requested (``coro`` is cancelled).
        """
        task = asyncio.ensure_future(coro)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        paused0 = self._paused_total()
        try:
            while True:
                left = end + (self._paused_total() - paused0) - loop.time()
                if left <= 0:
                    raise TimeoutError()
                done, _ = await asyncio.wait({task}, timeout=min(STOP_POLL, left))
                if done:
                    return task.result()
                if self._stopped(turn_id):
                    raise StopRequested()
        finally:
            if not task.done():
                task.cancel()
                try:
                    await task
                except BaseException:
                    pass
