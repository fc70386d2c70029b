"""The times the service reads: one :class:`Clock` per service, handed to every part that reads one.

Two clocks and one zone, as spec §6 and §8 use them:

- :meth:`Clock.now`: the real clock (epoch seconds) — caps counters, expiry, what a row records;
- :meth:`Clock.scheduler_now`: the scheduler's clock (:mod:`palui.triggers.clock`) — when a job is
  due, its next run; a test clock under ``PALUI_TEST_CLOCK``;
- :meth:`Clock.timezone`: where a day starts and how times are shown (``caps.timezone``).

A part that reads the time asks its clock rather than the ``time`` module, so a test or a replay can
hand the service another clock. Functions below the service that default to the real clock (the
runner's sweeps) keep theirs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from palui.store import usage

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from palui.config import Settings


class Clock:
    """The service's clocks.

    Args:
        settings: ``caps.timezone`` is read at each :meth:`timezone`.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def now(self) -> float:
        """The real time, epoch seconds."""
        return time.time()

    def scheduler_now(self) -> float:
        """The scheduler's time, epoch seconds. Raises ConfigError for a bad ``PALUI_TEST_CLOCK``."""
        from palui.triggers import clock  # only a service that runs jobs reads it (``palui tools list`` does not)

        return clock.now()

    def timezone(self) -> ZoneInfo | None:
        """The zone that decides where a day starts and how times are shown (``caps.timezone``;
        None is the system zone)."""
        return usage.zone(self.settings.caps.timezone)
