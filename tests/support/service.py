"""Start a real ``palui serve`` process on a free loopback port for a test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


class ServiceProcess:
    """``python -m palui serve --port 0`` on ``home``; ``url``, ``token``, ``client`` once started."""

    def __init__(self, home: Path, env: dict | None = None, tick: float = 0.2):
        self.home = home
        e = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        e.update({"PALUI_HOME": str(home), "PALUI_TICK_SECONDS": str(tick)})
        e.update(env or {})
        self.env = e
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "ServiceProcess":
        info = self.home / "serve.json"
        if info.exists():
            info.unlink()
        self.log = open(self.home / "serve.log", "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "palui", "serve", "--port", "0"], env=self.env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"palui serve exited: {(self.home / 'serve.log').read_text()}")
            if info.exists():
                try:
                    data = json.loads(info.read_text())
                    self.url = f"http://127.0.0.1:{data['port']}"
                    self.token = (self.home / "access_token").read_text().strip()
                    self.client = httpx.Client(base_url=self.url, timeout=60,
                                               headers={"Authorization": f"Bearer {self.token}"})
                    if self.client.get("/api/health").status_code == 200:
                        return self
                except (ValueError, KeyError, httpx.HTTPError, FileNotFoundError):
                    pass
            time.sleep(0.1)
        raise RuntimeError("palui serve did not start in time")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
