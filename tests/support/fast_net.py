"""The fast net's guard: a test not marked ``slow`` may not start a process, a browser or a network socket.

``pytest -m "not slow"`` is the fast net a developer runs after each change; the whole suite (``slow``
included) is what CI runs. A test belongs to the fast net unless it is marked ``@pytest.mark.slow``, and
:func:`watch` (wrapped around every phase of every test by ``tests/conftest.py``) fails an unmarked test
that does, in the test's own thread or in a thread started while the test runs, any of:

- **starts a process**: ``subprocess.Popen`` (so ``subprocess.run``, ``asyncio.create_subprocess_exec``
  and ``_shell``, which build on it, ``os.popen``), ``os.system``, ``os.fork``, ``os.forkpty``,
  ``os.posix_spawn``, ``os.posix_spawnp`` (so ``os.spawn*`` and ``pty.fork``), and
  ``_posixsubprocess.fork_exec`` (``multiprocessing``'s spawn and forkserver starts);
- **starts a browser**: Playwright starts its driver, and the driver the browser, as a process, so
  this is the rule above;
- **opens a network socket**: ``bind``, ``connect``, ``connect_ex`` or ``sendto`` on an ``AF_INET`` or
  ``AF_INET6`` socket — a listening test server on 127.0.0.1 in a thread of the test process counts,
  and so does any client connection to it. Unix-domain sockets do not count: asyncio's event loop
  wakes itself through an unnamed ``AF_UNIX`` pair, and a Unix socket of another process needs that
  process, whose start counts.

What runs in the test process without those stays in the fast net: an MCP server reached through the
SDK's in-memory transport (``support/mcp_inprocess.py``), an httpx ``MockTransport``, a real SQLite file,
Click's ``CliRunner``.

The forbidden call raises :class:`NotInTheFastNet` (an ``OSError``, so the code under test takes the
path it takes when a process or a connection cannot be made) before anything starts, and the test fails
at the end of the phase even when the code under test swallowed the error. A thread that was already
running before the test began (a server thread of a session-wide rig) is not watched: its calls belong
to the tests that started it.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import os
import socket
import subprocess
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INET = (socket.AF_INET, socket.AF_INET6)


class NotInTheFastNet(OSError):
    """Raised in place of a process start or a network socket in a test that is not marked ``slow``."""


@dataclass
class Watch:
    """What one watched stretch of a test did. ``allowed``: the test is marked ``slow`` (nothing is refused)."""

    name: str
    allowed: bool
    before: set[threading.Thread] = field(default_factory=set)
    seen: list[str] = field(default_factory=list)

    def mine(self) -> bool:
        """The calling thread belongs to the test: the main thread, or one started after the watch began."""
        t = threading.current_thread()
        return t is threading.main_thread() or t not in self.before


_watches: list[Watch] = []
_lock = threading.Lock()


def _check(what: str) -> None:
    """Refuse ``what`` when the innermost watch does not allow it and the calling thread is the watched test's."""
    with _lock:
        w = _watches[-1] if _watches else None
        if w is None or w.allowed or not w.mine():
            return
        w.seen.append(what + _caller())
    raise NotInTheFastNet(f"{what}: a test not marked slow may not start a process, a browser or a network "
                          "socket (tests/support/fast_net.py)")


def _caller() -> str:
    """`` (from FILE:LINE)``: the innermost frame of Palui or of the tests that led to the call."""
    here = Path(__file__).resolve()
    for frame in reversed(traceback.extract_stack()):
        path = Path(frame.filename)
        if path != here and ("palui" in path.parts or "tests" in path.parts) and "site-packages" not in path.parts:
            parts = path.parts
            start = max(i for i, p in enumerate(parts) if p in ("palui", "tests"))
            return f" (from {'/'.join(parts[start:])}:{frame.lineno})"
    return ""


@contextlib.contextmanager
def watch(name: str, *, allowed: bool = False) -> Iterator[Watch]:
    """Watch the calls of one stretch of a test (see the module docstring); the innermost watch wins, so a
    test of the guard can watch a stretch of its own (threads started before it are then not watched at all).
    Install the guard first (:func:`install`)."""
    w = Watch(name, allowed, set(threading.enumerate()) - {threading.main_thread()})
    with _lock:
        _watches.append(w)
    try:
        yield w
    finally:
        with _lock:
            _watches.remove(w)


def _describe_args(args: Any) -> str:
    if isinstance(args, (list, tuple)):
        return " ".join(str(a) for a in args)[:200]
    return str(args)[:200]


def _wrap(owner: Any, name: str, what: Callable[..., str]) -> None:
    original = getattr(owner, name)
    if getattr(original, "_fast_net", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> Any:
        label = what(*args, **kwargs)
        if label:
            _check(label)
        return original(*args, **kwargs)

    guarded._fast_net = True  # type: ignore[attr-defined]
    guarded.__wrapped__ = original  # type: ignore[attr-defined]
    guarded.__name__ = getattr(original, "__name__", name)
    setattr(owner, name, guarded)


def _socket_call(call: str) -> Callable[..., str]:
    def what(sock: socket.socket, *args: Any, **_kw: Any) -> str:
        if sock.family not in INET:
            return ""
        address = args[-1] if args else ""
        return f"socket.{call}({address!r}) on an {sock.family.name} socket"
    return what


def install() -> None:
    """Put the guard in place for the rest of the process (idempotent). Outside a :func:`watch` nothing
    changes: every wrapped call goes straight through."""
    _wrap(subprocess.Popen, "_execute_child",
          lambda self, args, *a, **k: f"a process ({_describe_args(args)})")
    _wrap(_posixsubprocess, "fork_exec", lambda args, *a, **k: f"a process ({_describe_args(args)})")
    for name in ("fork", "forkpty"):
        _wrap(os, name, lambda *a, _n=name, **k: f"os.{_n}()")
    _wrap(os, "system", lambda command, *a, **k: f"a process (os.system {command!r})")
    for name in ("posix_spawn", "posix_spawnp"):
        _wrap(os, name, lambda path, argv, *a, _n=name, **k: f"a process (os.{_n} {_describe_args(argv)})")
    for call in ("bind", "connect", "connect_ex", "sendto"):
        _wrap(socket.socket, call, _socket_call(call))
