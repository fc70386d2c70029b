"""The turn's counted time (spec §6), with the clock stopped while the person is asked (spec §7).

:class:`TurnClock` owns the run's stopwatch: the start of the current stretch of counted time and the
seconds spent waiting for the person's answer to a server's question, which are not counted. The
runner holds it and adds the counted seconds to ``Turn.seconds`` at each save; the call collaborators
ask it for the time left, and the server-questions collaborator stops and starts it around a wait.
All times are ``time.monotonic()`` seconds.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.runner.state import Turn


class TurnClock:
    """The counted seconds of one run of a turn, against ``budgets.seconds`` (read at each question)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._t0 = time.monotonic()  # start of the current stretch of counted time
        self._wait_start: float | None = None  # while the person is being asked: since when
        self._paused_ever = 0.0  # seconds waited for the person in this run
        self._paused_stretch = 0.0  # of which since the last save (subtracted from the stretch)

    def start(self) -> None:
        """A run starts: counted time starts now."""
        self._t0 = time.monotonic()

    def time_left(self, t: Turn) -> float:
        """Seconds of ``budgets.seconds`` left to ``t``: its stored seconds plus this stretch, waits excluded."""
        counted = time.monotonic() - self._t0 - self._peek_paused()
        return self._settings.budgets.seconds - (t.seconds + counted)

    def sync(self, t: Turn) -> None:
        """Add this stretch's counted seconds to ``t.seconds`` and start a new stretch (before a save)."""
        now = time.monotonic()
        t.seconds += now - self._t0 - self._take_paused()
        self._t0 = now

    # -- the person is asked: the clock stops --------------------------------------------------------

    def wait_begin(self) -> None:
        """The person is asked now (a server's question inside an open call)."""
        if self._wait_start is None:
            self._wait_start = time.monotonic()

    def wait_end(self) -> None:
        """The person answered (or the wait ended otherwise): counted time runs again."""
        self._pause_flush(time.monotonic())
        self._wait_start = None

    def paused_total(self) -> float:
        """Seconds this run spent waiting for the person, the ongoing wait included."""
        self._pause_flush(time.monotonic())
        return self._paused_ever

    def _pause_flush(self, now: float) -> None:
        """Move the ongoing wait into the counters."""
        if self._wait_start is not None:
            d = now - self._wait_start
            self._paused_ever += d
            self._paused_stretch += d
            self._wait_start = now

    def _take_paused(self) -> float:
        """Seconds paused since the last sync (the sync subtracts them from the counted time)."""
        self._pause_flush(time.monotonic())
        d, self._paused_stretch = self._paused_stretch, 0.0
        return d

    def _peek_paused(self) -> float:
        self._pause_flush(time.monotonic())
        return self._paused_stretch
