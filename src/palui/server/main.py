"""Starting the service process: bind, write pid/port/token files, serve with uvicorn, clean up."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from palui.errors import PaluiError, UsageError
from palui.server import discovery
from palui.text.loopback import is_loopback

if TYPE_CHECKING:
    from types import FrameType

    from palui.server.app import ServeHook
    from palui.service.api import Service


def bind(host: str, port: int) -> socket.socket:
    """Bind a listening socket (port 0 picks a free port). Raises PaluiError when it cannot.

    The socket is made with protocol ``IPPROTO_TCP``: asyncio sets TCP_NODELAY on the connections
    it accepts only then (their protocol is copied from this socket), and without it Nagle's
    algorithm and delayed ACKs hold each response on a kept-alive connection for about 40 ms
    (docs/decisions/0081-tcp-nodelay.md). The option is set on the listening socket too, which Linux
    gives accepted ones.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except (OSError, OverflowError) as e:
        sock.close()
        raise PaluiError(f"cannot listen on {host}:{port}: {getattr(e, 'strerror', None) or e}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class Serving:
    """One ``palui serve`` of ``svc`` (spec §8), set up to the point it listens: the one-service lock
    taken, the delivery targets checked, the socket bound (port 0 picks a free one), the access token made,
    the model library loaded, the app built and ``serve.json`` written. :meth:`run` then serves until
    :meth:`stop` (or, in :func:`serve`, SIGTERM/SIGINT) and cleans up.

    Refuses a non-loopback address unless the access token already exists (it is created
    by a first start on loopback), so the person has seen the token before the service
    is reachable from elsewhere. Refuses to start a second service on the same home.
    ``serve_hooks`` run while the service runs (:func:`palui.server.app.create_app`).
    Raises PaluiError (UsageError for a port out of range).
    """

    def __init__(self, svc: Service, host: str, port: int, echo: Callable[[str], None],
                 tick_seconds: float = 1.0, serve_hooks: Sequence[ServeHook] = ()) -> None:
        import uvicorn

        from palui.server.app import create_app
        from palui.server.guarded_h11 import MAX_HEAD_BYTES, protocol

        settings = self.settings = svc.settings
        self.svc = svc
        if not 0 <= port <= 65535:
            raise UsageError(f"--port {port}: a port is 0-65535 (0 picks a free one)")
        # One service per PALUI_HOME (spec §8): an exclusive lock held for the process's life,
        # so two services started at the same moment cannot both run.
        lock = discovery.take_lock(settings)
        if lock is None:
            other = discovery.find_service(settings)
            where = f" (pid {other.pid}, {other.url})" if other else ""
            raise PaluiError(f"a Palui service already runs on this PALUI_HOME{where}")
        self.lock = lock
        try:
            # The full check of the apprise URLs (every other start checks their syntax only, spec §10.4).
            svc.notifier.check_delivery_targets()
            if not is_loopback(host) and not discovery.read_token(settings):
                raise PaluiError(f"refusing to listen on {host} (not loopback) before an access token exists: "
                                 "start once with the default host to create it, and keep it safe")
            self.sock = sock = bind(host, port)
        except BaseException:
            lock.close()
            raise
        token, created = discovery.ensure_token(settings)  # after a successful bind: a failed start shows nothing
        self.port = real_port = sock.getsockname()[1]
        # The model library takes ~2 s to import; do it now rather than inside the first turn,
        # where it would block the event loop (and every request) while it loads.
        svc.turns.preload()

        # uvicorn re-raises SIGTERM after its graceful shutdown, so a `finally` here may never run:
        # remove serve.json at the end of the app's own shutdown instead.
        svc.runtime.on_shutdown(lambda: discovery.clear_info(settings))
        app = create_app(svc, token, host, real_port, tick_seconds=tick_seconds, serve_hooks=serve_hooks)
        discovery.write_info(settings, host, real_port)
        shown = f"[{host}]" if ":" in host else host
        echo(f"Palui service on http://{shown}:{real_port} (pid from {discovery.info_path(settings)})")
        if created:
            echo(f"access token (shown once; stored in {discovery.token_path(settings)}, mode 0600): {token}")
            echo(f"open http://{shown}:{real_port}/login?token={token}")
        else:
            echo(f"access token: stored in {discovery.token_path(settings)}")
        # uvicorn's own warnings and errors go to the process's log (logs/palui.log, set up by the CLI), not
        # the terminal: log_config=None keeps uvicorn from installing its stderr handlers (spec §8.1). The
        # protocol is uvicorn's h11 one with a deadline and size limits on each request's head (guarded_h11);
        # between requests, timeout_keep_alive (5 s) closes an idle connection.
        config = uvicorn.Config(app, log_level="warning", log_config=None, access_log=False,
                                timeout_graceful_shutdown=10, lifespan="on", timeout_keep_alive=5,
                                http=protocol(settings.serve.header_timeout_seconds),
                                h11_max_incomplete_event_size=MAX_HEAD_BYTES)

        class Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: FrameType | None) -> None:
                svc.runtime.begin_drain()  # drain at once: turns pause at their next step boundary
                super().handle_exit(sig, frame)

        self.server = Server(config)
        self._loop: asyncio.AbstractEventLoop | None = None

    def run(self) -> None:
        """Serve until stopped, then remove ``serve.json``, close the socket and release the lock."""
        async def serving() -> None:
            self._loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        try:
            asyncio.run(serving())
        finally:
            discovery.clear_info(self.settings)
            self.sock.close()
            self.lock.close()

    def stop(self) -> None:
        """Stop as SIGTERM does (turns drain, then a graceful shutdown); safe from another thread."""
        import signal

        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.server.handle_exit, signal.SIGTERM, None)


def serve(svc: Service, host: str, port: int, echo: Callable[[str], None], tick_seconds: float = 1.0,
          serve_hooks: Sequence[ServeHook] = ()) -> None:
    """Run the service until SIGTERM/SIGINT (spec §8): :class:`Serving`, in this process's main thread."""
    serving = Serving(svc, host, port, echo, tick_seconds, serve_hooks)
    # uvicorn restores the handlers it found and re-raises the signal after a graceful
    # shutdown; with these no-op handlers in place the process then exits 0 (a clean stop).
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    serving.run()
