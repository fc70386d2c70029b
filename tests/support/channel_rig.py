"""What the Telegram and Matrix rigs share: a served home with one chat channel and a ``script:`` model.

:class:`ChannelRig` holds the service (:class:`support.live_service.LiveService`, in the test process unless
``process=True``), writes the model's steps (each turn reads them when it runs), runs ``palui`` commands
with the service's environment, and reads the channel's state. ``support/telegram_rig.py`` and
``support/matrix_rig.py`` add how their channel is added and paired.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from support.live_service import LiveService, wait_for


class ChannelRig:
    """The service on ``home`` with the channel ``channel`` (added by the subclass). ``toml`` adds palui.toml
    lines; ``process``: the service is a child (a test that kills it with SIGKILL)."""

    channel = ""

    def __init__(self, home: Path, toml: str = "", *, process: bool = False) -> None:
        self.home = home
        self.script = home / "script.json"
        self.set_script({"text": "ok"})
        (home / "palui.toml").write_text(f'model = "script:{self.script}"\n{toml}', encoding="utf-8")
        self.svc = LiveService(home, process=process)

    def set_script(self, *steps: dict[str, Any]) -> None:
        tmp = self.script.with_suffix(".tmp")
        tmp.write_text(json.dumps({"steps": list(steps)}), encoding="utf-8")
        os.replace(tmp, self.script)

    def cli(self, *args: str, env: dict[str, str] | None = None, timeout: float = 60,
            process: bool = False) -> subprocess.CompletedProcess:
        """``palui ARGS`` on this home, with the service's environment: in this process, or in a child with
        ``process=True``."""
        return self.svc.cli(*args, env=env, timeout=timeout, process=process)

    def start(self, timeout: float = 30) -> ChannelRig:
        """Start the service and wait until the channel is up (``unpaired`` or ``connected``)."""
        self.svc.start()
        wait_for(lambda: self.state() in ("unpaired", "connected"), timeout, what=f"the {self.channel} channel")
        return self

    def stop(self) -> None:
        self.svc.stop()

    def state(self) -> str:
        rows = self.svc.rows("SELECT state FROM channels WHERE name = ?", (self.channel,))
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
