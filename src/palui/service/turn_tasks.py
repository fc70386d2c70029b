"""The turn tasks of this process: every turn the service runs here is one asyncio task registered in
:class:`TurnTasks`, so a front end can follow its events and the drain at shutdown can wait for it.

A lower part: it runs what it is handed (:meth:`TurnTasks.launch` takes the coroutine that runs the
claimed turn from the turns part, :class:`~palui.service.turns.TurnsPart`) and never calls up. The
tick that takes turns up under ``palui serve`` is :mod:`palui.service.runtime`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from palui.types import shows_text, wants_text

if TYPE_CHECKING:  # asyncio is imported where a task is made: a command that runs no turn does not pay for it
    import asyncio

    from palui.results import TurnEvent, TurnResult

#: Receives each event of a turn as it happens (:data:`palui.results.TurnEvent`).
EventSink = Callable[["TurnEvent"], None]
#: Runs a claimed turn to its end, pause or stop: ``run(turn_id, on_event, drain)`` → the turn's result;
#: ``drain()`` is True once the process drains (the turn pauses at its next step boundary).
RunTurn = Callable[[str, EventSink, Callable[[], bool]], Awaitable["TurnResult"]]


class TurnTasks:
    """Turn tasks of one service and the queues that follow them.

    Attributes:
        tasks: turn id → the task running it in this process.
        draining: True once the process refuses new work (a signal, the shutdown); set by the runtime.
    """

    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task[TurnResult]] = {}
        self.listeners: dict[str, list[asyncio.Queue[TurnEvent | None]]] = {}
        # The stored events (those with a ``seq``) each running task has sent so far: a late subscriber
        # gets them first, so it misses none that are not yet saved (:meth:`subscribe_from`).
        self.backlog: dict[str, list[TurnEvent]] = {}
        self.draining = False

    def _fanout(self, turn_id: str, extra: EventSink | None) -> EventSink:
        def send(event: TurnEvent) -> None:
            if "seq" in event:
                self.backlog.setdefault(turn_id, []).append(event)
            for q in self.listeners.get(turn_id, []):
                q.put_nowait(event)
            if extra is not None:
                extra(event)

        # Text is streamed while someone follows the turn here (a page, a terminal) or the caller shows it.
        return shows_text(send, lambda: bool(self.listeners.get(turn_id)) or wants_text(extra))

    def launch(self, turn_id: str, run: RunTurn,
               on_event: EventSink | None = None) -> asyncio.Task[TurnResult] | None:
        """Run a turn this process has already claimed (``run``), in a task of the running loop.
        Returns None while draining (the turn stays claimable by the next start)."""
        if self.draining:
            return None
        import asyncio

        async def go() -> TurnResult:
            try:
                return await run(turn_id, self._fanout(turn_id, on_event), lambda: self.draining)
            finally:
                self.backlog.pop(turn_id, None)
                for q in self.listeners.get(turn_id, []):
                    q.put_nowait(None)

        task = asyncio.create_task(go())
        self.tasks[turn_id] = task
        task.add_done_callback(lambda _t: self.tasks.pop(turn_id, None) if self.tasks.get(turn_id) is _t else None)
        return task

    def subscribe(self, turn_id: str) -> asyncio.Queue[TurnEvent | None]:
        """A queue of the turn's events as it runs in this process, then ``None`` when its task ends."""
        import asyncio

        q: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        self.listeners.setdefault(turn_id, []).append(q)
        return q

    def subscribe_from(self, turn_id: str) -> tuple[list[TurnEvent], asyncio.Queue[TurnEvent | None]]:
        """(the stored events the turn's running task has sent so far, a queue of what follows); taken
        together, with no await between, so nothing falls in the gap."""
        return list(self.backlog.get(turn_id, [])), self.subscribe(turn_id)

    def unsubscribe(self, turn_id: str, q: asyncio.Queue[TurnEvent | None]) -> None:
        """Stop sending the turn's events to ``q`` (a queue from :meth:`subscribe`)."""
        qs = self.listeners.get(turn_id, [])
        if q in qs:
            qs.remove(q)
        if not qs:
            self.listeners.pop(turn_id, None)
