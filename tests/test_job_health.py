"""A job whose connectors were down is not a success (spec §8.4): its result carries a connector-health line,
it ends ``partial`` when some connector it needed was down and ``failed`` when all were, with one notice each,
never ``done``. Real MCP servers over streamable HTTP (tests/support/mcp_hostile.py), one of them killed; the
jobs run through ``palui jobs run`` with a ``script:`` model.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from palui.types import Origin
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow


@pytest.fixture
def servers(tmp_path):
    procs = {}
    for name in ("notes", "mail"):
        spec = hostile_spec(tmp_path / f"{name}.json", [tool("search", annotations=READ)])
        p = subprocess.Popen([sys.executable, str(HOSTILE), str(spec), "--http"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        procs[name] = (p, f"http://127.0.0.1:{int(p.stdout.readline().split()[1])}/mcp")
    yield procs
    for p, _ in procs.values():
        p.kill()
        p.wait(30)


def run_job(cli, home, tmp_path, name: str, *steps) -> tuple[int, dict]:
    (home / "palui.toml").write_text(f'model = "{write_script(tmp_path / f"{name}.json", *steps)}"\n')
    r = cli("jobs", "run", name, "--json")
    return r.returncode, json.loads(r.stdout)


def health(out: dict) -> str:
    [end] = [e for e in out["events"] if e["type"] == "end"]
    return end["health"]


def told(cli, turn: str) -> list[str]:
    return [n["text"] for n in json.loads(cli("inbox", "--json").stdout) if n.get("turn") == turn]


def test_a_job_with_a_connector_down_is_partial_all_down_failed_never_done(cli, home, tmp_path, servers):
    for name, (_, url) in servers.items():
        r = cli("connectors", "add", name, "--url", url, "--enable-read")
        assert r.returncode == 0, r.stderr
    mail, _ = servers["mail"]
    mail.kill()
    mail.wait(30)
    for name, extra in (("digest", []), ("mailonly", ["--connector", "mcp-mail"]), ("notesonly", [])):
        assert cli("jobs", "add", name, "--cron", "0 8 * * *", "--prompt", "Summarise my day.", *extra).returncode == 0

    code, out = run_job(cli, home, tmp_path, "digest", calls(call("mcp-notes__search", q="today"),
                                                            call("mcp-mail__search", q="today")), text("Summary."))
    assert (code, out["status"]) == (1, "partial"), json.dumps(out["events"], indent=1)[:4000]
    line = health(out)
    assert line.startswith("Connectors: mcp-notes ok; mcp-mail down (") and "mcp-mail__search not done" in line
    [notice] = told(cli, out["turn"])  # one notice
    assert "partial" in notice and line in notice

    code, out = run_job(cli, home, tmp_path, "mailonly", calls(call("mcp-mail__search", q="today")), text("Nothing."))
    assert (code, out["status"]) == (1, "failed")
    assert health(out).startswith("Connectors: mcp-mail down (")
    [notice] = told(cli, out["turn"])
    assert notice.startswith("Job failed") and health(out) in notice

    code, out = run_job(cli, home, tmp_path, "notesonly", calls(call("mcp-notes__search", q="x")), text("Fine."))
    assert (code, out["status"]) == (0, "done") and health(out) == "Connectors: mcp-notes ok."
    listed = {j["name"]: j["last_status"] for j in json.loads(cli("jobs", "list", "--json").stdout)}
    assert listed == {"digest": "partial", "mailonly": "failed", "notesonly": "done"}
    table = cli("jobs", "list").stdout
    assert "partial" in table and "failed" in table


async def test_a_webhook_summary_says_it_used_no_connector(svc, tmp_path):
    r = await svc.turns.send("payload", origin=Origin.WEBHOOK, model=write_script(tmp_path / "w.json", text("A push.")))
    assert r["status"] == "done" and health(r) == "Connectors: none used (a webhook summary gets no tools)."
    [notice] = [n["text"] for n in svc.notifier.inbox() if n.get("turn") == r["turn"]]
    assert notice.endswith("Connectors: none used (a webhook summary gets no tools).")
