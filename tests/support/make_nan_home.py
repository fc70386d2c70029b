"""Make the NaN upgrade fixture: a PALUI_HOME written by a Palui that stored what a model sent, ``NaN`` and
``Infinity`` included, before every JSON writer was strict (spec §10.1).

``tests/test_upgrade.py`` opens a copy with today's code: ``palui audit verify`` must be clean, ``GET
/api/approvals?all=1`` must answer 200 and ``palui approvals list --json`` must print JSON. The committed
fixture ``tests/fixtures/home-nan/`` was made by commit 240a2e5 (schema migration 37) with that checkout's own
virtual environment::

    /work/base/.venv/bin/python tests/support/make_nan_home.py tests/fixtures/home-nan

Every step is that Python's ``-m palui`` in a subprocess, so the file is exactly what that Palui wrote:

1. A chat turn whose scripted model calls the read ``tasks__list_tasks {"status": NaN}`` (it ran: its events
   hold ``NaN``) and an unknown tool with ``{"a": Infinity}`` (refused: its event holds ``Infinity``).
2. A chat turn paused on an approval of ``recall__forget_memory {"id": NaN}`` (the approval's arguments hold
   ``NaN``, its hash was made over them; a hashed row is never rewritten).
3. ``palui backup`` into ``home/palui.db`` (one checkpointed file), with ``audit_head`` and ``palui.toml``.

The scripts are written into the home (``scripts/``) and named by a relative path, so nothing points outside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TOML = "# The NaN upgrade fixture (tests/support/make_nan_home.py): the defaults.\n"


def main(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        (home / "palui.toml").write_text(TOML)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PALUI_")}
        env["PALUI_HOME"] = str(home)

        def palui(*args: str) -> str:
            r = subprocess.run([sys.executable, "-m", "palui", *args], env=env, cwd=home, capture_output=True,
                               text=True, timeout=300)
            if r.returncode != 0:
                raise SystemExit(f"palui {' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
            return r.stdout

        (home / "scripts").mkdir()
        # json.dumps writes NaN and Infinity as Python does: what a provider's arguments may carry
        (home / "scripts" / "read.json").write_text(json.dumps({"steps": [
            {"tool_calls": [{"tool": "tasks__list_tasks", "args": {"status": float("nan")}},
                            {"tool": "nope__missing", "args": {"a": float("inf")}}]},
            {"text": "Listed."}]}))
        (home / "scripts" / "forget.json").write_text(json.dumps({"steps": [
            {"tool_calls": [{"tool": "recall__forget_memory", "args": {"id": float("nan")}}]},
            {"text": "Forgot."}]}))
        read = json.loads(palui("run", "--json", "--model", "script:scripts/read.json", "list my tasks"))
        assert read["status"] == "done", read
        paused = json.loads(palui("run", "--json", "--model", "script:scripts/forget.json", "forget it"))
        assert paused["status"] == "awaiting_approval", paused
        (out / "home").mkdir(parents=True)
        palui("backup", str(out / "home" / "palui.db"))
        for name in ("palui.toml", "audit_head"):
            shutil.copy(home / name, out / "home" / name)
        shutil.copytree(home / "scripts", out / "home" / "scripts")
        import palui
        from palui.store.migrations import MIGRATIONS

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(palui.__file__).resolve().parents[2]).stdout.strip()

        (out / "fixture.json").write_text(json.dumps({
            "commit": commit, "schema": max(n for n, _, _ in MIGRATIONS), "read_turn": read["turn"],
            "paused_turn": paused["turn"], "approval": paused["pending_approvals"][0]["id"]}, indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
