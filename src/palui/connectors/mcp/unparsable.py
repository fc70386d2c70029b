"""A stdio server's stdout lines that are not JSON-RPC, logged as one line per burst with a count (spec §7.7).

The SDK's stdio transport (``mcp.client.stdio._parse_line``) logs every stdout line that is not a JSON-RPC
message with ``logger.exception("Failed to parse JSONRPC message from server")``: a traceback per line, so
one call to a server printing 200,000 junk lines grew ``logs/palui.log`` from 0 to 18.6 MB. The SDK hands
the error to the session as well (Palui's client ignores it: the line is skipped, the session goes on).

Palui's boundary is a :class:`logging.Filter` on that logger (:func:`install`), which knows the connector
from :data:`SERVER`, a context variable the connection's supervisor task sets (the SDK's reader task
inherits it). The first such line of a burst is logged as one line, without the traceback or the line
itself (a server's output may hold secrets; its stderr log is the redacted one); the rest of the burst is
counted and logged as one line with the count when the connection closes (:func:`burst_ended`) or when
such a line comes after :data:`BURST_SECONDS`, which starts a new burst.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

#: The connector (``mcp-…``) whose connection the current task serves, set by its supervisor task.
SERVER: ContextVar[str | None] = ContextVar("palui_mcp_server", default=None)
#: How long one burst of unparsable lines lasts, in seconds, from its first line.
BURST_SECONDS = 60.0

SDK_LOGGER = "mcp.client.stdio"
SDK_MESSAGE = "Failed to parse JSONRPC message from server"
log = logging.getLogger("palui.connectors.mcp")


@dataclass
class _Burst:
    started: float  # monotonic seconds
    wall: float  # epoch seconds, for the count line
    more: int = 0


class UnparsableLines(logging.Filter):
    """Rewrites the first record of a burst into one line and drops the rest, counting them per server."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._bursts: dict[str, _Burst] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != SDK_MESSAGE:
            return True
        server = SERVER.get() or "an MCP server"
        now = self._clock()
        with self._lock:
            burst = self._bursts.get(server)
            if burst is not None and now - burst.started < BURST_SECONDS:
                burst.more += 1
                return False
            self._bursts[server] = _Burst(now, time.time())
        if burst is not None:
            _say_count(server, burst)
        record.msg = ("%s: a line on its stdout is not a JSON-RPC message: ignored (a server must write only "
                      "MCP messages there; more such lines in the next %g s are counted, not logged)")
        record.args = (server, BURST_SECONDS)
        record.exc_info = record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"  # the session goes on: not an error
        return True

    def ended(self, server: str) -> None:
        """``server``'s connection closed: its burst's count, if any, is logged now."""
        with self._lock:
            burst = self._bursts.pop(server, None)
        if burst is not None:
            _say_count(server, burst)


def _say_count(server: str, burst: _Burst) -> None:
    if burst.more:
        since = time.strftime("%H:%M:%S", time.localtime(burst.wall))
        log.warning("%s: %d more lines on its stdout since %s were not JSON-RPC messages: ignored",
                    server, burst.more, since)


_FILTER = UnparsableLines()
_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Put the filter on the SDK's stdio logger (once per process)."""
    global _installed
    with _install_lock:
        if not _installed:
            logging.getLogger(SDK_LOGGER).addFilter(_FILTER)
            _installed = True


def burst_ended(server: str) -> None:
    """Log the count of ``server``'s last burst (its connection closed)."""
    _FILTER.ended(server)
