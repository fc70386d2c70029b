"""A real ``palui serve`` subprocess for the web page's tests, and a Chromium for Playwright.

The service runs with a fresh PALUI_HOME on a free loopback port (``--port 0``; the port
is read from ``serve.json``). Chromium is Debian's ``/usr/bin/chromium`` (Playwright's own
browser download is not reachable here); a missing one skips the browser tests, except
under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from support import inprocess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class Served:
    """``palui serve --port 0`` on ``home``; ``url``, ``token``, ``port`` once it answers."""

    def __init__(self, home: Path, env: dict[str, str] | None = None, start_timeout: float = 30.0):
        self.home = home
        e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        e.update({"PALUI_HOME": str(home), "PALUI_TICK_SECONDS": "0.2"})
        e.update(env or {})
        self.env = e
        self.log = open(home / "serve.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=e,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + start_timeout
        info = home / "serve.json"
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"palui serve exited ({self.proc.returncode}): {self.output()}")
            if info.exists():
                try:
                    self.port = int(json.loads(info.read_text())["port"])
                    self.token = (home / "access_token").read_text().strip()
                    self.url = f"http://127.0.0.1:{self.port}"
                    if httpx.get(self.url + "/api/health", headers=self.auth, timeout=2).status_code == 200:
                        break
                except (ValueError, KeyError, OSError, httpx.HTTPError):
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"palui serve did not answer in {start_timeout} s: {self.output()}")
            time.sleep(0.05)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def output(self) -> str:
        self.log.flush()
        return (self.home / "serve.log").read_text()

    def cli(self, *args: str, timeout: float = 60, process: bool = False) -> subprocess.CompletedProcess:
        """The ``palui`` command line on the same PALUI_HOME (it finds this service): in this process
        (``support/inprocess.py``), or as ``python -m palui`` in a child with ``process=True``."""
        if process:
            return subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True,
                                  env=self.env, timeout=timeout)
        return inprocess.run(args, env=self.env)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


def chromium_path() -> str:
    """``/usr/bin/chromium``; skips the test (fails under CI) when it is not installed."""
    if not CHROMIUM.exists():
        message = "Debian's chromium is not installed (/usr/bin/chromium): apt-get install -y chromium"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(CHROMIUM)


def launch_browser(playwright, user_data_dir: Path, **context_args):
    """A headless Chromium with a fresh profile (a persistent context on ``user_data_dir``)."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=chromium_path(), headless=True, args=CHROMIUM_ARGS, **context_args)
