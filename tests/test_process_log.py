"""``logs/palui.log`` stays small (spec §10.1, §7.7): capped and rotated like a server's stderr log, and a burst
of stdout lines that are not JSON-RPC from a stdio server is logged as one line plus one line with a count,
through the real CLI and a real stdio server (``tests/support/mcp_hostile.py``'s ``noise``).
"""

from __future__ import annotations

import sys

import pytest

from palui.cli.process_log import CAP_BYTES
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow
LINES = 20_000


def noisy_home(cli_process, home, tmp_path) -> str:
    spec = hostile_spec(tmp_path / "spec.json", [tool("noise", "noise", READ)])
    r = cli_process("connectors", "add", "noisy", "--", sys.executable, str(HOSTILE), str(spec))
    assert r.returncode == 0, r.stderr
    assert cli_process("tools", "enable", "mcp-noisy__noise").returncode == 0
    return write_script(tmp_path / "s.json", calls(call("mcp-noisy__noise", lines=LINES)), text("Done."))


def test_a_burst_of_unparsable_stdout_is_one_line_and_a_count(cli_process, home, tmp_path):
    model = noisy_home(cli_process, home, tmp_path)
    r = cli_process("run", "--json", "--model", model, "make some noise")
    assert r.returncode == 0, r.stderr
    log = (home / "logs" / "palui.log").read_text()
    assert len(log) < 10_000, f"palui.log grew to {len(log):,} characters"
    assert "Traceback" not in log
    first = [ln for ln in log.splitlines() if "a line on its stdout is not a JSON-RPC message" in ln]
    count = [ln for ln in log.splitlines() if "more lines on its stdout since" in ln]
    assert len(first) == 1 and "mcp-noisy" in first[0], log
    assert len(count) == 1 and f"mcp-noisy: {LINES - 1} more lines" in count[0], log


def test_the_log_is_capped_and_rotated(cli_process, home, tmp_path):
    model = noisy_home(cli_process, home, tmp_path)
    path = home / "logs" / "palui.log"
    old = "2026-01-01 00:00:00,000 WARNING earlier: a record of an earlier day\n"
    path.write_text(old * (CAP_BYTES // 2 // len(old)))  # the file is full: the next record rotates it
    assert cli_process("run", "--json", "--model", model, "make some noise").returncode == 0
    rotated = path.with_name("palui.log.1")
    assert rotated.read_text().startswith(old) and "not a JSON-RPC message" in path.read_text()
    assert path.stat().st_size + rotated.stat().st_size <= CAP_BYTES
    assert oct(path.stat().st_mode & 0o777) == "0o600"
