"""A TCP proxy on 127.0.0.1 that can lose an answer and then refuse connections, for outbox fault tests.

A real server (Synapse) stays behind it untouched; the client under test (matrix-nio in ``palui serve``)
talks to the proxy. :meth:`FaultProxy.lose_answer_to` arms a trap: the next request whose bytes contain
the pattern reaches the server whole, the server answers (so it *did* the work: Synapse stored the event),
and the proxy drops that answer, closes every connection and stops listening — exactly what a client sees
when the homeserver dies mid-send: a dropped connection, then "connection refused" on every retry.
:meth:`FaultProxy.up` listens again on the same port::

    with FaultProxy(synapse.port) as proxy:
        proxy.lose_answer_to(b"/send/m.room.message/palui-")
        ...                      # the client sends; proxy.tripped is set; the port refuses connections
        proxy.up()

The proxy runs its own event loop in a daemon thread; its methods are thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Self

from support.tcp import free_port

__all__ = ["FaultProxy"]


class FaultProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``upstream`` byte for byte (see the module docstring)."""

    def __init__(self, upstream: int, host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self.host = host
        self.port = 0
        self.tripped = threading.Event()
        self._pattern: bytes | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fault-proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def _call(self, coro):  # noqa: ANN001, ANN202 - a coroutine run on the proxy's loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def start(self) -> Self:
        self._thread.start()
        self.port = free_port(self.host)
        self.up()
        return self

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._call(self._down())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def up(self) -> None:
        """Listen (again) on the same port."""
        self._call(self._up())

    def down(self) -> None:
        """Close every connection and stop listening: new connections are refused."""
        self._call(self._down())

    def lose_answer_to(self, pattern: bytes) -> None:
        """Arm the trap (see the module docstring); :attr:`tripped` is set once it fired."""
        self.tripped.clear()
        self._pattern = pattern

    async def _up(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)

    async def _down(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        trapped = asyncio.Event()

        async def to_server() -> None:
            while data := await reader.read(65536):
                if self._pattern is not None and self._pattern in data:
                    self._pattern = None
                    trapped.set()
                up_writer.write(data)
                await up_writer.drain()

        async def to_client() -> None:
            while data := await up_reader.read(65536):
                if trapped.is_set():  # the server answered the trapped request: the answer is lost
                    await self._down()
                    self.tripped.set()
                    return
                writer.write(data)
                await writer.drain()

        try:
            await asyncio.gather(to_server(), to_client())
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()
