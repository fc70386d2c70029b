"""The HTTP/1.1 protocol ``palui serve`` runs: uvicorn's h11 protocol with a deadline and size limits on a
request's head (spec §8.1).

uvicorn waits for a request's head (its request line and headers) without a deadline: its keep-alive timer
runs only between requests, so a connection that sends half a head, or one byte a minute, is held until the
service stops (200 such connections were held 70 s). Its only size check is h11's, on what is buffered while
a head is incomplete, so whether a long head is refused depended on how the client's bytes were split, and
the refusal was a 400. :class:`GuardedH11Protocol` adds, before h11 reads the bytes:

- a **deadline** for each head, from its first byte (from the connection's start for the first request):
  ``serve.header_timeout_seconds`` (10 by default); a head not complete by then is answered 408 and its
  connection closed (a connection that sent nothing at all is closed without an answer). Trickling bytes
  does not extend it;
- a **request line** of at most :data:`MAX_REQUEST_LINE` bytes (414) and a **head** of at most
  :data:`MAX_HEAD_BYTES` (431), counted on the bytes as they arrive, however they are split.

The answers are written straight to the socket (h11 has not seen a request to answer) as JSON
``{"error", "kind": "usage", "field": "headers"}``, with ``Connection: close``. Between requests, uvicorn's
``timeout_keep_alive`` (5 s) closes an idle kept-alive connection, as before.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

#: The longest request line (method, target, version) taken, in bytes; a longer one is answered 414.
MAX_REQUEST_LINE = 8_192
#: The longest head (request line and headers, up to the blank line) taken, in bytes; longer: 431. h11's
#: own limit on an incomplete head is set to the same number.
MAX_HEAD_BYTES = 16_384
#: ``serve.header_timeout_seconds``'s default: how long a request's head may take to arrive, in seconds.
HEADER_TIMEOUT_SECONDS = 10.0

#: After a refusal, how long and how much of what the client still sends is read and dropped before closing.
LINGER_SECONDS = 2.0
LINGER_BYTES = 1_048_576

_REASONS = {408: b"Request Timeout", 414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


class GuardedH11Protocol(H11Protocol):
    """uvicorn's :class:`H11Protocol` with the head's deadline and limits of this module. Made per service by
    :func:`protocol` (uvicorn builds one per connection from the class)."""

    header_timeout: float = HEADER_TIMEOUT_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head = bytearray()  # the current head's bytes so far, while it is incomplete
        self._head_timer: asyncio.TimerHandle | None = None
        self._lingering: asyncio.TimerHandle | None = None  # refused: what still arrives is read and dropped
        self._dropped = 0

    def _waiting_for_head(self) -> bool:
        """No request of this connection is being read or answered: the next bytes are a head's."""
        return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn types it
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._lingering is not None:
            self._lingering.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None:  # after a refusal: dropped, up to a bound
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.transport.close()
            return
        reading = self._waiting_for_head()
        if reading:
            if self._head_timer is None:  # the first bytes of the next request of a kept-alive connection
                self._arm()
            status = self._scan(data)
            if status is not None:
                return self._refuse(status)
        super().data_received(data)
        if not self._waiting_for_head():  # the head is read: the request runs without a deadline of ours
            self._head.clear()
            self._disarm()

    def _scan(self, data: bytes) -> int | None:
        """Add ``data`` to the head so far; 414 or 431 when a limit is passed, else None."""
        self._head += data
        end = self._head.find(b"\r\n\r\n")
        line = self._head.find(b"\r\n")
        line_length = len(self._head) if line == -1 else line
        if line_length > MAX_REQUEST_LINE:
            return 414
        if (len(self._head) if end == -1 else end + 4) > MAX_HEAD_BYTES:
            return 431
        if end != -1:
            self._head.clear()
        return None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if not self._waiting_for_head() or self.transport.is_closing():
            return
        if not self._head:
            # Not a byte of a request yet (a browser's preconnected socket): closed without an answer, which
            # the client could take for the answer to the request it sends next on this socket.
            self.transport.close()
            return
        self._refuse(408)

    def _refuse(self, status: int) -> None:
        """Answer ``status`` with a JSON refusal and close the connection (no request was read)."""
        self._disarm()
        self._head.clear()
        words = {
            408: f"the request's headers did not arrive within {self.header_timeout:g} seconds",
            414: f"the request line is over {MAX_REQUEST_LINE:,} bytes",
            431: f"the request's headers are over {MAX_HEAD_BYTES:,} bytes",
        }[status]
        body = json.dumps({"error": words, "kind": "usage", "field": "headers"}, allow_nan=False).encode()
        self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                             b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body))
        # A close with unread bytes would reset the connection, and a client still sending its head could lose
        # the answer: say we are done writing, then read and drop what still comes for a moment (a lingering
        # close, as nginx does) before closing.
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._lingering = self.loop.call_later(LINGER_SECONDS, self.transport.close)


def protocol(header_timeout: float) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn is given (``uvicorn.Config(http=…)``), with this service's head deadline
    (``serve.header_timeout_seconds``) in seconds."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout": float(header_timeout)})
