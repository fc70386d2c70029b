"""Every TCP socket the test servers listen on, and every free-port probe, made in one place
(docs/decisions/0081-tcp-nodelay.md's rule, for the tests' own servers).

asyncio sets ``TCP_NODELAY`` on an accepted connection only when the listening socket says its protocol is
``IPPROTO_TCP``; a socket made with ``socket.socket()`` says 0, so every small answer on a kept-alive
connection waits for Nagle's algorithm to meet the client's delayed ACK: about 40 ms per call, which once
made a benchmark measure the test server rather than Palui. :func:`listen_tcp` makes the socket with
``IPPROTO_TCP`` and sets the option on it too. ``tests/test_support_sockets.py`` fails when a file of
``tests/support`` calls ``socket.socket(`` anywhere but here.

The support scripts that run as programs (``python tests/support/mcp_hostile.py``) import this module as
``tcp`` (their folder is first on ``sys.path``); the tests import it as ``support.tcp``.
"""

from __future__ import annotations

import socket

__all__ = ["free_port", "listen_tcp"]


def _tcp_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def listen_tcp(host: str = "127.0.0.1", port: int = 0, *, backlog: int = 128,
               reuse_port: bool = False) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: any free port), with ``IPPROTO_TCP`` as its protocol,
    ``TCP_NODELAY`` and ``SO_REUSEADDR`` set (``SO_REUSEPORT`` too with ``reuse_port``: a new server may listen
    before the old one is killed). Connections wait in a backlog of ``backlog``."""
    sock = _tcp_socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` right now (the caller binds it later: a small race, which callers retry)."""
    with _tcp_socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
