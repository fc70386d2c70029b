"""A served home with one chat channel and a ``script:`` model: what every channel's rig is built on.

:class:`ServedChannel` holds the service (:class:`support.live_service.LiveService`, in the test process
unless ``process=True``), writes the model's steps (each turn reads them when it runs), runs ``palui``
commands with the service's environment, reads the channel's state and checks at the end that the channel's
secrets reached no log. The channels' own rigs add how their channel is added and paired
(``support/telegram_rig.py``, ``matrix_rig.py``, ``mail_rig.py``); the conformance suite's rig interface
(``support/channel_rig.py``) adds what the suite asks of every channel.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, ClassVar

from support.live_service import LiveService, wait_for


class ServedChannel:
    """The service on ``home`` with the channel :attr:`kind` (added by the subclass). ``toml`` adds palui.toml
    lines; ``process``: the service is a child (a test that kills it with SIGKILL)."""

    #: The channel kind (``palui channels add KIND``) and the channel's name (the same: the default name).
    kind: ClassVar[str] = ""

    def __init__(self, home: Path, toml: str = "", *, process: bool = False) -> None:
        self.home = home
        self.script = home / "script.json"
        self.set_script({"text": "ok"})
        (home / "palui.toml").write_text(f'model = "script:{self.script}"\n{toml}', encoding="utf-8")
        self.svc = LiveService(home, process=process)
        self.running = False

    def set_script(self, *steps: dict[str, Any]) -> None:
        """The model's next turns (``{"text": …}``, ``{"tool_calls": […]}``, ``"delay_seconds"``)."""
        tmp = self.script.with_suffix(".tmp")
        tmp.write_text(json.dumps({"steps": list(steps)}), encoding="utf-8")
        os.replace(tmp, self.script)

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            process: bool = False) -> subprocess.CompletedProcess:
        """``palui ARGS`` on this home, with the service's environment: in this process, or in a child with
        ``process=True``."""
        return self.svc.cli(*args, env=env, timeout=timeout, process=process)

    def start(self, timeout: float = 60) -> ServedChannel:
        """Start the service and wait until the channel reached its platform (``unpaired`` or ``connected``)."""
        self.svc.start()
        self.running = True
        wait_for(lambda: self.state() in ("unpaired", "connected"), timeout, what=f"the {self.kind} channel")
        return self

    def stop(self) -> None:
        """Stop the service (as SIGTERM does). The platform keeps running."""
        self.running = False
        self.svc.stop()

    def state(self) -> str:
        """The channel's state as the running service set it (``connected``, ``unpaired``, ``error: …``)."""
        rows = self.svc.rows("SELECT state FROM channels WHERE name = ?", (self.kind,))
        return rows[0][0] if rows else ""

    def last_turn(self) -> dict[str, Any]:
        tid = self.svc.rows("SELECT id FROM turns ORDER BY rowid DESC LIMIT 1")[0][0]
        return self.svc.turn(tid)

    def logs(self) -> str:
        """What the service wrote to its logs (its output, ``logs/palui.log``)."""
        text = ""
        for path in (self.home / "serve-test.log", self.home / "logs" / "palui.log"):
            if path.exists():
                text += path.read_text(errors="replace")
        return text

    def close(self, *secrets: str) -> None:
        """End of the test: stop the service if it runs; the channel's stored secrets (its secrets file) and
        ``secrets`` must be in none of its logs."""
        proc = getattr(self.svc, "proc", None)
        if self.running or (proc is not None and proc.poll() is None):  # a test that failed mid-kill leaves no child
            self.stop()
        stored = self.home / "secrets" / f"channel-{self.kind}.json"
        named = dict(json.loads(stored.read_text())) if stored.exists() else {}
        named.update({f"secret {i}": s for i, s in enumerate(secrets)})
        logs = self.logs()
        leaked = [k for k, v in named.items() if str(v) and str(v) in logs]
        assert not leaked, f"the {self.kind} channel's {leaked} leaked into a log"
