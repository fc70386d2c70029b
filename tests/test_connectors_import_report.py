"""``palui connectors import`` reports each server of the file on one line, its name escaped like every
other surface (spec §4.7): a U+202E in a name from the file never reaches the terminal raw."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.chatdrive import chat_env


@pytest.mark.slow
def test_a_server_name_with_a_bidi_override_is_escaped_in_the_report(home, tmp_path):
    name = "files\u202eevil"
    servers = {"mcpServers": {name: {"command": str(tmp_path / "no-such-server")}}}
    (tmp_path / "servers.json").write_text(json.dumps(servers), encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "palui", "connectors", "import", str(tmp_path / "servers.json")],
                       capture_output=True, text=True, env=chat_env(home), timeout=120)
    out = r.stdout + r.stderr
    assert "\u202e" not in out, out
    assert "files\\u202eevil" in out, out
    assert "Traceback" not in out
