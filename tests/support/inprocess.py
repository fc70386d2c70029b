"""``palui`` commands run in the test process, through Click's ``CliRunner``, against a real PALUI_HOME.

A ``python -m palui`` child costs at least 0.15 s of CPU to start (about 1 s when the command builds the
whole service); most CLI tests check what a command prints and stores, not the process around it, so they
run here: :class:`InProcessCLI` calls :func:`palui.cli.main` with the arguments under
``CliRunner.isolation`` (its own stdin, stdout and stderr, the environment given) and returns the same
``subprocess.CompletedProcess`` the real-process runner (``tests/conftest.py``'s ``CLI``) does: the exit
code, stdout and stderr as text. What only a process shows (exit by a signal, a terminal, a pipe closed
early, what a fresh interpreter imports) keeps a real-process test (the ``cli_process`` fixture).

What one run leaves in the process that a process exit would drop, and which :func:`isolated` puts back:

- ``os.environ`` as a whole (the command's PALUI_HOME and ``env``; a library's ``setdefault``);
- ``sys.argv``, the working directory and the file mode mask (``palui.cli`` sets 0o077);
- the root logger's handlers and level (``palui.cli`` adds a file handler to the home's log), the log
  record factory (the chat channels' redaction wraps it), the filters on the MCP SDK's OAuth loggers
  and the flag that installs them once (``palui.connectors.mcp.oauth.redact``);
- the start back-off of MCP servers (``palui.connectors.mcp._START_FAILURES``, keyed by database file);
- the handlers of SIGINT and SIGTERM;
- non-daemon threads the command started (apprise deliveries): joined, as the interpreter does at exit.

What a command builds can be given a seam :func:`run` passes on: :data:`HOOKS` (``palui.cli.main(argv,
hooks=...)``), set by the ``mcp_in_process`` mark (``tests/conftest.py``) so that the tests' own MCP servers
run in this process (``support/mcp_inprocess.py``).

Everything else Palui caches lives on the objects of one run (``Database.memo``), so it goes with them. A
run's SQLite connections stay open until the garbage collector finalises them, in whichever thread it runs
then (a test server's thread closing a ``palui.db-wal`` descriptor is that): SQLite keeps the locks of the
process's connections right as long as nothing else closes a descriptor of the database file, which Palui
never does (``palui.home.prepare_data_dir``; tests/test_data_dir.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import click.formatting
from click.testing import CliRunner

# What `python -m palui` shows as the program's name in usage lines.
PROG_NAME = "python -m palui"
#: What in-process commands plug into the service they build (a ``palui.cli.common.Hooks``; None: nothing).
#: A test sets it through the ``mcp_in_process`` mark, never by hand.
HOOKS: Any = None
_OAUTH_LOGGERS = ("mcp.client.auth", "mcp.client.auth.oauth2", "mcp.client.auth.utils", "mcp.shared._httpx_utils")


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Put back, on leaving, the process state a ``palui`` command changes (the list in the module's
    docstring)."""
    environ = dict(os.environ)
    argv = list(sys.argv)
    cwd = os.getcwd()
    mask = os.umask(0o077)
    os.umask(mask)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    factory = logging.getLogRecordFactory()
    oauth_filters = {n: list(logging.getLogger(n).filters) for n in _OAUTH_LOGGERS}
    signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    threads = set(threading.enumerate())
    try:
        yield
    finally:
        for t in set(threading.enumerate()) - threads:
            if not t.daemon:
                t.join(60)
        for h in root.handlers:
            if h not in handlers:
                h.close()
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.setLogRecordFactory(factory)
        for name, filters in oauth_filters.items():
            logging.getLogger(name).filters[:] = filters
        redact = sys.modules.get("palui.connectors.mcp.oauth.redact")
        if redact is not None:
            redact._installed = bool(oauth_filters[_OAUTH_LOGGERS[0]])
        mcp = sys.modules.get("palui.connectors.mcp")
        if mcp is not None:
            mcp._START_FAILURES.clear()
        if threading.current_thread() is threading.main_thread():  # only the main thread sets handlers
            for s, h in signals.items():
                signal.signal(s, h)
        os.umask(mask)
        os.chdir(cwd)
        sys.argv[:] = argv
        os.environ.clear()
        os.environ.update(environ)


def run(args: Sequence[str], *, env: Mapping[str, str] | None = None, input: str | None = None,
        cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """``palui ARGS`` in this process, as ``subprocess.run([python, "-m", "palui", *args], env=env,
    cwd=cwd, input=input, capture_output=True, text=True)`` would run it: ``env`` is the command's whole
    environment (None: this process's). Returns the exit code, stdout and stderr."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(args, env, input, cwd)
    # Called from a test's event loop: the command (which may start its own loop) runs in a thread while the
    # test waits for it, as the test would wait for a child process.
    done: list[subprocess.CompletedProcess] = []
    worker = threading.Thread(target=lambda: done.append(_run(args, env, input, cwd)), name="palui-cli-in-process")
    worker.start()
    worker.join()
    return done[0]


def _run(args: Sequence[str], env: Mapping[str, str] | None, input: Any,
         cwd: str | Path | None, streams: list[Any] | None = None) -> subprocess.CompletedProcess:
    """The command under :func:`isolated`; ``input`` is a text or a binary file; ``streams`` gets the
    command's stdout, stderr and both interleaved as soon as they exist (:class:`Started` reads them while it
    runs)."""
    from palui.cli import main

    code: int = 0
    crash = ""
    with isolated():
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        with CliRunner().isolation(input=input, color=False) as (out, err, mixed):
            if streams is not None:
                streams[:] = [out, err, mixed]
            # Help text wrapped as in a child whose stdout is a pipe (Click: the terminal's width or COLUMNS,
            # at most 80, less 2), not at the runner's fixed 80; the isolation puts the value back.
            columns = os.environ.get("COLUMNS", "")
            click.formatting.FORCED_WIDTH = max(min(int(columns) if columns.isdigit() else 80, 80) - 2, 50)
            sys.argv[:] = ["palui", *args]
            try:
                main(list(args), prog_name=PROG_NAME, hooks=HOOKS)
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if e.code is not None and not isinstance(e.code, int):
                    print(e.code, file=sys.stderr)
            except Exception:  # what an uncaught exception does to a process: a traceback, exit 1
                crash = traceback.format_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout, stderr = out.getvalue(), err.getvalue()
    return subprocess.CompletedProcess(["palui", *args], code, stdout.decode("utf-8", "replace"),
                                       stderr.decode("utf-8", "replace") + crash)


class Started:
    """``palui ARGS`` running in this process, in a thread of its own, its standard input a pipe: as a child
    started with ``stdin=PIPE`` whose output a test reads as it comes (a sign-in's printed address, then the
    pasted answer). :meth:`output` is what it printed so far, :meth:`write` types into it, :meth:`wait` ends
    its input and returns the ``CompletedProcess``. While it runs, no other command may run in this process
    (the standard streams and the environment are the process's), and the test prints nothing."""

    def __init__(self, args: Sequence[str], *, env: Mapping[str, str] | None = None) -> None:
        read_end, write_end = os.pipe()
        self._stdin = os.fdopen(write_end, "w", buffering=1)
        self._streams: list[Any] = []
        self._done: list[subprocess.CompletedProcess] = []
        stdin = os.fdopen(read_end, "rb")

        def work() -> None:
            try:
                self._done.append(_run(args, env, stdin, None, self._streams))
            finally:
                stdin.close()

        self._thread = threading.Thread(target=work, name="palui-cli-started", daemon=True)
        self._thread.start()

    def output(self, stderr: bool = False) -> str:
        """What the command printed to stdout so far (``stderr``: to stdout and stderr, in the order written)."""
        return self._streams[2 if stderr else 0].getvalue().decode("utf-8", "replace") if self._streams else ""

    def write(self, text: str) -> None:
        self._stdin.write(text)
        self._stdin.flush()

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float = 120) -> subprocess.CompletedProcess:
        """End the input and wait (a hang guard of ``timeout`` seconds) for the command's result."""
        try:
            self._stdin.close()
        except OSError:
            pass
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError(f"palui did not end within {timeout} s; it printed:\n{self.output()[-3000:]}")
        return self._done[0]


class InProcessCLI:
    """Runs ``palui ARGS`` in this process with this test's PALUI_HOME; the call's signature and result
    are those of the real-process ``CLI`` of ``tests/conftest.py`` (``timeout`` is accepted and not
    enforced: a command here cannot be killed, and every test waits on events)."""

    def __init__(self, home: Path):
        self.home = home

    def __call__(self, *args: str, env: dict | None = None, input: str | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        e["PALUI_HOME"] = str(self.home)
        e.update(env or {})
        return run(args, env=e, input=input)

    def json(self, *args: str, **kw):
        import json

        r = self(*args, **kw)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


def palui(home: Path, *args: str, env: Mapping[str, str] | None = None, input: str | None = None,
          cwd: str | Path | None = None, process: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    """``palui ARGS`` with PALUI_HOME=home, no other PALUI_* variable of this process and ``env`` added: in this
    process, or with ``process=True`` as ``python -m palui`` in a child (``timeout`` seconds at most)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
    e["PALUI_HOME"] = str(home)
    e.update(env or {})
    if process:
        return subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True, env=e,
                              input=input, cwd=cwd, timeout=timeout)
    return run(args, env=e, input=input, cwd=cwd)


def service(settings: Any = None) -> Any:
    """``palui.service.Service(settings)`` over this environment's PALUI_HOME, with the seam :data:`HOOKS`
    gives (the in-process MCP servers of a test marked ``mcp_in_process``)."""
    from palui.service import Service

    return Service(settings, mcp_transport=HOOKS.mcp_transport if HOOKS is not None else None)
