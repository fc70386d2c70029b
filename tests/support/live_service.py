"""A real ``palui serve`` process for tests: started on a free loopback port with a fresh
PALUI_HOME, talked to over HTTP, stopped with SIGTERM (or killed) at the end."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import httpx

from support.waiting import guard


def write_clock(path: Path, t: float) -> None:
    """Set the test clock (PALUI_TEST_CLOCK points at this file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(repr(float(t)))
    os.replace(tmp, path)  # the scheduler never reads a half-written file


def wait_for(pred: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll ``pred`` until it returns something truthy; return it. Fails the test after ``timeout`` s (at least
    ``support.waiting.GUARD``: a guard against a hang, never a speed check)."""
    timeout = guard(timeout)
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


class LiveService:
    """``python -m palui serve --port 0`` on ``home``. ``env`` adds variables (PALUI_TEST_CLOCK…)."""

    def __init__(self, home: Path, env: dict[str, str] | None = None, tick: float = 0.2) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        self.env.update({"PALUI_HOME": str(home), "PALUI_TICK_SECONDS": str(tick), **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.http: httpx.Client | None = None
        self.url = ""

    def start(self, timeout: float = 30.0) -> "LiveService":
        info_file = self.home / "serve.json"
        self.log = open(self.home / "serve-test.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"palui serve exited with {self.proc.returncode}: {self.log_text()}")
            try:
                info = json.loads(info_file.read_text())
            except (OSError, ValueError):
                return None
            return info if info.get("pid") == self.proc.pid else None

        info = wait_for(ready, timeout, what="serve.json")
        self.url = f"http://127.0.0.1:{info['port']}"
        self.port = int(info["port"])
        token = self.token = (self.home / "access_token").read_text().strip()
        self.http = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
        wait_for(lambda: self._healthy(), timeout, what="/api/health")
        return self

    def _healthy(self) -> bool:
        try:
            return self.http.get("/api/health").status_code == 200
        except httpx.HTTPError:
            return False

    def log_text(self) -> str:
        try:
            return (self.home / "serve-test.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Send ``sig`` and wait for the process; returns its exit code."""
        if self.http:
            self.http.close()
            self.http = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
        return self.proc.returncode if self.proc else 0

    def __enter__(self) -> "LiveService":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------

    def get(self, path: str, **params) -> Any:
        r = self.http.get(path, params=params)
        assert r.status_code == 200, (r.status_code, r.text)
        return r.json()

    def post(self, path: str, data: dict | None = None, expect: int = 200) -> Any:
        r = self.http.post(path, json=data or {})
        assert r.status_code == expect, (r.status_code, r.text)
        return r.json()

    def turn(self, turn_id: str) -> dict:
        return self.get(f"/api/turns/{turn_id}")

    def wait_turn(self, turn_id: str, statuses=("done", "awaiting_approval", "budget", "error", "stopped"),
                  timeout: float = 20.0) -> dict:
        return wait_for(lambda: (lambda t: t if t["status"] in statuses else None)(self.turn(turn_id)),
                        timeout, what=f"turn {turn_id} to reach {statuses}")

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        con = sqlite3.connect(self.home / "palui.db", timeout=30, isolation_level=None)  # autocommit
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def count(self, table: str, where: str = "1", params: tuple = ()) -> int:
        return self.rows(f"SELECT COUNT(*) FROM {table} WHERE {where}", params)[0][0]
