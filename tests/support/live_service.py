"""A running ``palui serve`` for tests: a fresh PALUI_HOME, a free loopback port, talked to over HTTP.

By default the service runs **in the test process** (docs/decisions/0156 for the command line, carried over
to ``palui serve``): :class:`palui.server.main.Serving` — the same set-up, app, runtime and chat channels
as ``palui serve`` — serves in a thread of its own, and ``stop()`` stops it as SIGTERM does. A child
``python -m palui serve`` costs about 1.5 s of CPU to start (an interpreter, the imports, the model
library); here the imports are already done and a start costs a tenth of that. ``process=True`` runs the
real child, for what only a process shows: a kill -9 and what the next start finds, SIGTERM's exit code,
a service whose pid differs from the test's.

In the test process the service sees this process's environment: ``env`` (and PALUI_HOME) is applied to
``os.environ`` while it runs and put back after, and its in-process commands (:meth:`LiveService.cli`)
run with the same environment. What the service changes in the process is put back at ``stop()``: the log
record factory and the library loggers' levels the chat channels set, its file log handler; sse-starlette's
process-wide "a server stopped" flag is cleared at each start. With
``mcp_in_process`` (``support/inprocess.HOOKS``) its MCP servers run in the process too.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from support import inprocess
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
    """``palui serve --port 0`` on ``home``: in this process (a thread), or a child with ``process=True``.
    ``env`` adds variables (PALUI_TEST_CLOCK…); ``tick`` is PALUI_TICK_SECONDS."""

    def __init__(self, home: Path, env: dict[str, str] | None = None, tick: float = 0.2, *,
                 process: bool = False) -> None:
        self.home = home
        self.process = process
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        self.env.update({"PALUI_HOME": str(home), "PALUI_TICK_SECONDS": str(tick), **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.http: httpx.Client | None = None
        self.url = ""
        self._serving: Any = None
        self._thread: threading.Thread | None = None
        self._saved: dict[str, Any] = {}

    @property
    def pid(self) -> int:
        """The pid of the process the service runs in (this one, unless ``process=True``)."""
        return self.proc.pid if self.proc is not None else os.getpid()

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, timeout: float = 30.0) -> LiveService:
        self.log = open(self.home / "serve-test.log", "a", encoding="utf-8")
        if self.process:
            self._start_process(timeout)
        else:
            self._start_here()
        self.token = (self.home / "access_token").read_text().strip()
        self.http = httpx.Client(base_url=self.url, headers=self.auth, timeout=60)
        wait_for(lambda: self._healthy(), timeout, what="/api/health")
        return self

    def _start_process(self, timeout: float) -> None:
        info_file = self.home / "serve.json"
        self.proc = proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=self.env,
                                            stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            if proc.poll() is not None:
                raise AssertionError(f"palui serve exited with {proc.returncode}: {self.log_text()}")
            try:
                info = json.loads(info_file.read_text())
            except (OSError, ValueError):
                return None
            return info if info.get("pid") == proc.pid else None

        info = wait_for(ready, timeout, what="serve.json")
        self.port = int(info["port"])
        self.url = f"http://127.0.0.1:{self.port}"

    def _start_here(self) -> None:
        from palui.channels import redaction
        from palui.channels.manager import ChannelManager
        from palui.config import load_settings
        from palui.server.main import Serving

        saved = self._saved
        saved["environ"] = {k: os.environ.get(k) for k in self.env}
        saved["factory"] = logging.getLogRecordFactory()
        saved["redactors"] = list(redaction._installed)
        saved["levels"] = {n: logging.getLogger(n).level for n in redaction.LIBRARY_LOGGERS}
        os.environ.update(self.env)
        # sse-starlette (the MCP SDK's streams, the gateway) ends every SSE stream once any uvicorn server of
        # the process has stopped (a process-wide flag its patched handle_exit sets): a new service is a new
        # server, as a new process would be.
        from sse_starlette.sse import AppStatus

        AppStatus.should_exit = False
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        handler = saved["handler"] = logging.FileHandler(self.home / "logs" / "palui.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger().addHandler(handler)
        svc = inprocess.service(load_settings(self.env))
        try:
            self._serving = Serving(svc, "127.0.0.1", 0, lambda line: print(line, file=self.log, flush=True),
                                    tick_seconds=float(self.env["PALUI_TICK_SECONDS"]), serve_hooks=[ChannelManager])
        except BaseException:
            svc.db.close()
            self._put_back()
            raise
        self.port = self._serving.port
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._serve, name="palui-serve-in-process", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            self._serving.run()
        except BaseException as e:  # the test reads it in the log (and in a failed wait)
            print(f"palui serve (in process) ended: {e!r}", file=self.log, flush=True)

    def _put_back(self) -> None:
        from palui.channels import redaction

        saved, self._saved = self._saved, {}
        if not saved:
            return
        root = logging.getLogger()
        root.removeHandler(saved["handler"])
        saved["handler"].close()
        logging.setLogRecordFactory(saved["factory"])
        redaction._installed[:] = saved["redactors"]
        for name, level in saved["levels"].items():
            logging.getLogger(name).setLevel(level)
        # The stopped server set sse-starlette's process-wide exit flag: left set, every SSE stream of a later
        # test's app in this process (the gateway through ASGITransport) would end before its first answer.
        from sse_starlette.sse import AppStatus

        AppStatus.should_exit = False
        for k, v in saved["environ"].items():  # only what the service's environment set: what Palui itself sets
            if v is None:                        # once per process (PTB_TIMEDELTA at import) stays, as it would
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    def _healthy(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"palui serve exited with {self.proc.returncode}: {self.log_text()}")
        if self._thread is not None and not self._thread.is_alive():
            raise AssertionError(f"palui serve (in process) ended: {self.log_text()}")
        try:
            return self.http.get("/api/health").status_code == 200
        except httpx.HTTPError:
            return False

    def log_text(self) -> str:
        try:
            return (self.home / "serve-test.log").read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def output(self) -> str:
        """Everything the service printed (its start lines; a child's stderr too)."""
        self.log.flush()
        return (self.home / "serve-test.log").read_text(errors="replace")

    def cli(self, *args: str, timeout: float = 60, process: bool = False, env: dict[str, str] | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        """``palui ARGS`` with the service's environment (it finds this service): in this process
        (``support/inprocess.py``), or as ``python -m palui`` in a child with ``process=True``."""
        e = {**self.env, **(env or {})}
        if process:
            return subprocess.run([sys.executable, "-m", "palui", *args], capture_output=True, text=True, env=e,
                                  input=input, timeout=timeout)
        return inprocess.run(args, env=e, input=input)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        """Stop the service: a child gets ``sig`` and is waited for (its exit code is returned); in this
        process only SIGTERM and SIGINT mean anything (it stops as they stop it; 0 is returned)."""
        if self.http:
            self.http.close()
            self.http = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            self.log.close()
            return self.proc.returncode
        if sig not in (signal.SIGTERM, signal.SIGINT):
            raise AssertionError(f"signal {sig} needs the service's own process: LiveService(..., process=True)")
        if self._thread is not None:
            self._serving.stop()
            self._thread.join(guard(timeout))
            assert not self._thread.is_alive(), f"palui serve (in process) did not stop: {self.log_text()}"
            self._thread = None
            self._serving.svc.db.close()
        self._put_back()
        self.log.close()
        return 0

    def __enter__(self) -> LiveService:
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
