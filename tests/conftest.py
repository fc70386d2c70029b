"""Shared fixtures: every test gets a fresh PALUI_HOME; CLI runs go through the real entry point.

``cli`` runs a command in this process (``tests/support/inprocess.py``: Click's ``CliRunner`` over
``palui.cli.main``, the process state a command changes put back after it); ``cli_process`` runs it as
``python -m palui`` in a child, for what only a process shows (exit by a signal, a terminal, a pipe,
what a fresh interpreter imports). ``pytest --cli=process`` runs every ``cli`` call in a child too.

The fast net: a test not marked ``slow`` fails when it starts a process, a browser or a network socket
(``support/fast_net.py`` says exactly what counts); ``pytest -m "not slow"`` runs the rest.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from support import fast_net
from support.inprocess import InProcessCLI
from support.mail_rig import dovecot  # noqa: F401 - the email rig's mail server (one per run)
from support.matrix_rig import matrix_rig, people, synapse  # noqa: F401 - the Matrix rig's fixtures
from support.telegram_rig import fake, telegram_rig  # noqa: F401 - the Telegram rig's fixtures
from support.web_rig import browser, client, context, page, served, web_pages  # noqa: F401 - the web rig's fixtures


def pytest_addoption(parser):
    parser.addoption("--cli", choices=("inprocess", "process"), default="inprocess",
                     help="how the cli fixture runs palui: in the test process (default) or as a child process")


def pytest_configure(config):
    # croniter asks platform.architecture() at import, which runs `file -b` on the interpreter: once per
    # process, whichever test imports it first. Imported here, before any test is watched.
    import croniter  # noqa: F401

    # palui.channels.telegram sets PTB_TIMEDELTA once per process, at its import (python-telegram-bot warns
    # without it); a command run in this process puts the environment back after it, so the import's setting
    # would go with the first command that made it. Set for the whole run, as a `palui` process has it.
    os.environ.setdefault("PTB_TIMEDELTA", "1")

    fast_net.install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    return (yield from _guarded(item, "setup"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from _guarded(item, "call"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    return (yield from _guarded(item, "teardown"))


def _guarded(item, phase: str):
    """Run one phase of ``item`` under the fast net's guard: unless the test is marked ``slow``, a process
    start or a network socket fails it (support/fast_net.py), even where the code under test caught the
    error."""
    with fast_net.watch(f"{item.nodeid} ({phase})", allowed=item.get_closest_marker("slow") is not None) as w:
        try:
            result = yield
        finally:
            if w.seen:
                pytest.fail(f"not marked slow, but its {phase} started " + "; ".join(dict.fromkeys(w.seen))
                            + " (mark it @pytest.mark.slow, or keep it in process: tests/support/fast_net.py)",
                            pytrace=False)
    return result


def pytest_terminal_summary(terminalreporter):
    """The CPU the run cost, printed last: user+sys seconds of pytest and of its children (every process
    it started and waited for: ``palui`` commands, services, MCP servers, browsers). The suite's budget is
    CPU, not wall time, which the machine's load moves (bench/README.md)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own, children = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    terminalreporter.write_line(f"CPU: {own + children:.1f} s user+sys (pytest {own:.1f} s, its children "
                                f"{children:.1f} s)")


@pytest.fixture
def home(tmp_path, monkeypatch, request) -> Path:
    """A fresh PALUI_HOME with no PALUI_* variables leaking in from the environment. In a test marked
    ``mcp_in_process`` the tests' own MCP servers run in this process (``support/mcp_inprocess.py``) for
    ``svc``, ``cli`` and ``support.inprocess``."""
    for k in list(os.environ):
        if k.startswith("PALUI_"):
            monkeypatch.delenv(k, raising=False)
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("PALUI_HOME", str(h))
    if request.node.get_closest_marker("mcp_in_process"):
        from palui.cli.common import Hooks
        from support import inprocess, mcp_inprocess

        monkeypatch.setattr(inprocess, "HOOKS", Hooks(mcp_transport=mcp_inprocess.transport))
        monkeypatch.setattr(mcp_inprocess, "SERVED", {})  # the test's own servers (InProcessServer.add)
    return h


@pytest.fixture
def svc(home):
    """The service over ``home`` (with the in-process MCP servers of a test marked ``mcp_in_process``)."""
    from support import inprocess

    s = inprocess.service()
    yield s
    s.db.close()


class CLI:
    """Runs ``python -m palui`` in a subprocess with this test's PALUI_HOME."""

    def __init__(self, home: Path):
        self.home = home

    def __call__(self, *args: str, env: dict | None = None, input: str | None = None,
                 timeout: float = 120) -> subprocess.CompletedProcess:
        e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        e["PALUI_HOME"] = str(self.home)
        e.update(env or {})
        return subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True,
                              env=e, input=input, timeout=timeout)

    def json(self, *args: str, **kw):
        r = self(*args, **kw)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)


@pytest.fixture
def cli(home, request) -> CLI | InProcessCLI:
    """``palui ARGS`` with this test's PALUI_HOME, in this process (``--cli=process``: in a child)."""
    return CLI(home) if request.config.getoption("--cli") == "process" else InProcessCLI(home)


@pytest.fixture
def cli_process(home) -> CLI:
    """``python -m palui ARGS`` in a child process with this test's PALUI_HOME."""
    return CLI(home)
