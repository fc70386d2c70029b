"""Shared fixtures: every test gets a fresh PALUI_HOME; CLI runs go through the real entry point.

``cli`` runs a command in this process (``tests/support/inprocess.py``: Click's ``CliRunner`` over
``palui.cli.main``, the process state a command changes put back after it); ``cli_process`` runs it as
``python -m palui`` in a child, for what only a process shows (exit by a signal, a terminal, a pipe,
what a fresh interpreter imports). ``pytest --cli=process`` runs every ``cli`` call in a child too.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from support.inprocess import InProcessCLI


def pytest_addoption(parser):
    parser.addoption("--cli", choices=("inprocess", "process"), default="inprocess",
                     help="how the cli fixture runs palui: in the test process (default) or as a child process")


def pytest_terminal_summary(terminalreporter):
    """The CPU the run cost, printed last: user+sys seconds of pytest and of its children (every process
    it started and waited for: ``palui`` commands, services, MCP servers, browsers). The suite's budget is
    CPU, not wall time, which the machine's load moves (bench/README.md)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own, children = me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    terminalreporter.write_line(f"CPU: {own + children:.1f} s user+sys (pytest {own:.1f} s, its children "
                                f"{children:.1f} s)")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh PALUI_HOME with no PALUI_* variables leaking in from the environment."""
    for k in list(os.environ):
        if k.startswith("PALUI_"):
            monkeypatch.delenv(k, raising=False)
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("PALUI_HOME", str(h))
    return h


@pytest.fixture
def svc(home):
    from palui.service import Service

    s = Service()
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
