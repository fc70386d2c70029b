"""The gateway's caps on calls (spec §8.6): the cap step of the governed call, a gateway session's option.

A client may send at most its own number of calls to connectors in any 60 minutes (``palui gateway clients add
--calls-per-hour N``; unset: ``caps.gateway_client_calls_per_hour``), and every client together at most
``caps.gateway_calls_per_hour`` (the ceiling). Only calls **sent to a connector** count: a call refused before
(an unknown name, a switched-off tool, a tool outside the client's connectors, arguments refused, denied, over a
cap) costs nothing, so a client that guesses names locks nobody out.

The counts are kept per minute in ``gateway_call_minutes`` (one row per client and minute, and one for every
client, ``''``): a check reads at most 61 rows of one primary-key range, whatever the history (decision 0072's
rule for the turn caps). The window is the current minute and the 59 before it, so a call counts for 60 to 61
minutes. :meth:`GatewayCap.over` is the cap step (read only); :meth:`GatewayCap.take` counts a call right before
it is sent, checking again in the same transaction, so two sessions racing for the last call cannot both send.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from palui.config import Settings
    from palui.store.db import Database

#: The audit outcome of a gateway call refused by a cap (it was not sent, so no cap counts it).
OVER_CAP = "refused: over cap"
#: The counter row of every client together (the ceiling).
EVERY_CLIENT = ""
WINDOW_MINUTES = 60


def _minute(now: float) -> int:
    return int(now // 60)


def _window(c: sqlite3.Connection, client: str, now: float) -> list[tuple[int, int]]:
    """``(minute, calls)`` of ``client``'s counter rows in the window ending at ``now``, oldest first."""
    first = _minute(now) - WINDOW_MINUTES + 1
    return [(int(r[0]), int(r[1])) for r in c.execute(
        "SELECT minute, calls FROM gateway_call_minutes WHERE client = ? AND minute >= ? ORDER BY minute",
        (client, first)).fetchall()]


def _frees_at(rows: list[tuple[int, int]], cap: int) -> str:
    """When the window of ``rows`` (at least ``cap`` calls) has room for one more: the end of the minute whose
    calls, leaving the window, bring the count under ``cap``."""
    left, leaves = sum(n for _, n in rows), rows[-1][0]
    for minute, n in rows:
        left -= n
        if left < cap:
            leaves = minute
            break
    return datetime.fromtimestamp((leaves + WINDOW_MINUTES) * 60, UTC).strftime("%H:%M:%S UTC")


class GatewayCap:
    """One gateway client's caps.

    Args:
        db: the counters.
        settings: ``caps.gateway_calls_per_hour`` and ``caps.gateway_client_calls_per_hour``.
        client: the client's name.
        own: the client's own calls per hour (``--calls-per-hour``), None for the default.
        now: epoch seconds now.
    """

    def __init__(self, db: Database, settings: Settings, client: str, own: int | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self._db = db
        self._client = client
        self._own = own if own is not None else settings.caps.gateway_client_calls_per_hour
        self._ceiling = settings.caps.gateway_calls_per_hour
        self._now = now

    def _reason(self, c: sqlite3.Connection, now: float) -> str | None:
        rows = _window(c, self._client, now)
        if sum(n for _, n in rows) >= self._own:
            return (f"this client's cap of {self._own} calls an hour (palui gateway clients add --calls-per-hour; "
                    f"default caps.gateway_client_calls_per_hour) is reached: the next call is possible at "
                    f"{_frees_at(rows, self._own)}")
        every = _window(c, EVERY_CLIENT, now)
        if sum(n for _, n in every) >= self._ceiling:
            return (f"caps.gateway_calls_per_hour ({self._ceiling}) is reached by every client's calls together: "
                    f"the next call is possible at {_frees_at(every, self._ceiling)}")
        return None

    def over(self) -> str | None:
        """The cap step: why one more call would pass the client's cap or the ceiling, saying when the next is
        possible; None when it would not."""
        with self._db.read() as c:
            return self._reason(c, self._now())

    def take(self) -> str | None:
        """Count one call about to be sent (the client's row and every client's), unless a cap was reached since
        the cap step (another session's calls): then its reason, and nothing is counted. Rows older than the
        window are dropped on the way."""
        now = self._now()
        minute = _minute(now)
        with self._db.write() as c:
            why = self._reason(c, now)
            if why is not None:
                return why
            for who in (self._client, EVERY_CLIENT):
                c.execute("INSERT INTO gateway_call_minutes (client, minute, calls) VALUES (?, ?, 1)"
                          " ON CONFLICT (client, minute) DO UPDATE SET calls = calls + 1", (who, minute))
                c.execute("DELETE FROM gateway_call_minutes WHERE client = ? AND minute < ?",
                          (who, minute - WINDOW_MINUTES + 1))
        return None
