"""Shared fixtures: every test gets a fresh PALUI_HOME; CLI runs go through the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


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
def cli(home) -> CLI:
    return CLI(home)
