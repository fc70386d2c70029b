"""MCP secrets stay out of logs and displays (spec §10).

- A stdio server's stderr log is redacted before it is written: env values (also when a
  value arrives split across two pipe reads or inside a very long line); a failed ``add``
  keeps only that redacted log.
- An HTTP connector's URL password and query values are secrets: stored in the 0600
  secrets file, shown as ``***`` by the CLI, the API, the web sheet and error messages; a
  connector stored before (real URL in the database) still connects and is moved.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from palui.config import load_settings
from palui.connectors.hub import ConnectorHub
from palui.connectors.mcp import stderr as stderr_module
from palui.connectors.mcp.config import ServerConfig, display_url, read_secrets, redact, url_secrets, write_secrets
from palui.connectors.mcp.stderr import Redactor, StderrCapture, log_path
from support.mcp_servers import HOSTILE, READ, hostile_spec, palui, palui_json, tool

ENV_SECRET = "CRASHSECRET_42"
PASSWORD, QUERY_SECRET = "URLPASS-77", "QSECRET-99"


def files_containing(root, needle: str) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


# -- URLs ------------------------------------------------------------------------------------------


def test_display_url_hides_the_password_and_every_query_value():
    url = f"http://user:{PASSWORD}@127.0.0.1:18931/mcp?api_key={QUERY_SECRET}&x=a%20b&flag"
    assert display_url(url) == "http://user:***@127.0.0.1:18931/mcp?api_key=***&x=***&flag"
    assert display_url("https://example.org/mcp") == "https://example.org/mcp"
    assert display_url("https://user@example.org/mcp") == "https://user@example.org/mcp"  # no password
    assert set(url_secrets(url)) >= {PASSWORD, QUERY_SECRET, "a%20b", "a b"}
    cfg = ServerConfig("http", url=url)
    assert PASSWORD not in json.dumps(cfg.public()) and QUERY_SECRET not in json.dumps(cfg.public())
    assert cfg.secrets()["url"] == url
    assert ServerConfig.from_stored(cfg.public(), cfg.secrets()).url == url
    assert redact(f"cannot reach {url}", cfg.secret_values) == f"cannot reach {display_url(url)}"


def test_a_url_stored_before_it_was_secret_still_counts_and_a_lost_one_is_named():
    url = f"http://127.0.0.1:1/mcp?key={QUERY_SECRET}"
    assert ServerConfig.from_stored({"transport": "http", "url": url}, {}).url == url  # the old place
    with pytest.raises(Exception, match="lacks the value of the URL"):
        ServerConfig.from_stored(ServerConfig("http", url=url).public(), {})


def test_a_bad_url_is_not_echoed_with_its_secrets():
    with pytest.raises(Exception) as e:
        ServerConfig("http", url=f"ftp://u:{PASSWORD}@host/?k={QUERY_SECRET}")
    assert PASSWORD not in str(e.value) and QUERY_SECRET not in str(e.value)


# -- stderr ---------------------------------------------------------------------------------------------


def test_redactor_catches_a_secret_split_across_reads_and_inside_a_long_line(monkeypatch):
    r = Redactor([ENV_SECRET, "on"])  # "on": too short to redact, as in error messages
    out = r.feed(b"API_KEY=CRASH") + r.feed(b"SECRET_42 on\nnext") + r.finish()
    assert out == b"API_KEY=*** on\nnext"
    monkeypatch.setattr(stderr_module, "_MAX_LINE", 16)
    data = b"a" * 40 + ENV_SECRET.encode() + b"\xff" + b"b" * 40  # no newline, not UTF-8
    for step in (1, 5, 7, 13):
        r = Redactor([ENV_SECRET])
        out = b"".join(r.feed(data[i:i + step]) for i in range(0, len(data), step)) + r.finish()
        assert out == b"a" * 40 + b"***\xff" + b"b" * 40, step


@pytest.mark.slow
def test_stderr_log_is_redacted_before_it_is_written(tmp_path):
    cap = StderrCapture(tmp_path / "logs" / "mcp-x.stderr.log", secrets=[ENV_SECRET])
    errlog = cap.open()
    script = ("import os, time\nos.write(2, b'API_KEY=CRASH'); time.sleep(0.2)\nos.write(2, b'SECRET_42\\n')\n"
              f"os.write(2, b'z' * 100000 + b'{ENV_SECRET}' + b'z' * 10 + b'\\n')")
    subprocess.run([sys.executable, "-c", script], stderr=errlog, timeout=30)
    cap.spawned()
    assert cap.exited.wait(5)
    text = cap.path.read_text()
    assert ENV_SECRET not in text and "API_KEY=***\n" in text and "z***zzzzzzzzzz\n" in text


@pytest.mark.slow
def test_a_failed_add_keeps_only_a_redacted_stderr_log(home):
    script = "import os, sys; print(dict(os.environ), file=sys.stderr); sys.exit(3)"
    r = palui(home, "connectors", "add", "crashy", "--env", f"API_KEY={ENV_SECRET}", "--", sys.executable, "-c", script,
              process=True)  # a real process: a server child's output must not reach the command's
    assert r.returncode == 1 and "'API_KEY': '***'" in r.stderr and ENV_SECRET not in r.stderr
    log = log_path(home, "mcp-crashy")
    assert "'API_KEY': '***'" in log.read_text()  # kept for diagnosis, redacted
    assert files_containing(home, ENV_SECRET) == []


# -- HTTP URLs end to end ---------------------------------------------------------------------------------


@pytest.fixture
def http_port(tmp_path):
    spec = hostile_spec(tmp_path / "http.json", [tool("echo", annotations=READ)])
    p = subprocess.Popen([sys.executable, str(HOSTILE), str(spec), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        yield int(p.stdout.readline().split()[1])
    finally:
        p.terminate()
        p.wait(10)


@pytest.mark.slow
async def test_http_url_secrets_are_stored_apart_and_shown_redacted(home, http_port):
    from palui.service import Service

    url = f"http://user:{PASSWORD}@127.0.0.1:{http_port}/mcp?api_key={QUERY_SECRET}"
    shown = f"http://user:***@127.0.0.1:{http_port}/mcp?api_key=***"
    unreachable = f"http://user:{PASSWORD}@127.0.0.1:9/mcp?api_key={QUERY_SECRET}"
    bad = palui(home, "connectors", "add", "gone", "--url", unreachable, "--timeout", "5")
    assert bad.returncode == 1 and "could not be reached at http://user:***@127.0.0.1:9/mcp?api_key=***" in bad.stderr
    assert PASSWORD not in bad.stderr and QUERY_SECRET not in bad.stderr

    added = palui_json(home, "connectors", "add", "hosted", "--url", url, "--json")
    assert added["id"] == "mcp-hosted"
    show = palui(home, "connectors", "show", "mcp-hosted")
    listed = palui(home, "connectors", "list", "--json")
    assert f"url: {shown}" in show.stdout and shown in listed.stdout
    for out in (show.stdout, listed.stdout, json.dumps(added)):
        assert PASSWORD not in out and QUERY_SECRET not in out
    s = Service(load_settings({"PALUI_HOME": str(home)}))
    assert read_secrets(s.settings.secrets_dir, "mcp-hosted")["url"] == url
    assert files_containing(home, QUERY_SECRET) == [str(s.settings.secrets_dir / "mcp-hosted.json")]
    hub = ConnectorHub(s._hub.env)
    try:
        c = await hub.get("mcp-hosted")  # connects with the real URL from the secrets file
        assert c.state() == "connected" and (await c.call_tool("echo", {"a": 1})).text == 'echo: {"a": 1}'
    finally:
        await hub.close()
        s.db.close()


@pytest.mark.slow
async def test_a_connector_with_its_url_in_the_database_still_connects_and_the_url_moves(svc, home, http_port):
    url = f"http://127.0.0.1:{http_port}/mcp?api_key={QUERY_SECRET}"
    old_public = {"transport": "http", "url": url, "header_keys": [], "timeout_seconds": None,
                  "max_output_bytes": None}  # the shape stored before URLs were secrets
    with svc.db.write() as c:
        c.execute("INSERT INTO connectors (id, kind, name, transport, config_json, state, created_at)"
                  " VALUES ('mcp-old', 'mcp', 'old', 'http', ?, 'connected', ?)", (json.dumps(old_public), time.time()))
    write_secrets(svc.settings.secrets_dir, "mcp-old", {"env": {}, "headers": {}})
    assert svc.connectors.config("mcp-old")["url"] == f"http://127.0.0.1:{http_port}/mcp?api_key=***"
    hub = ConnectorHub(svc._hub.env)
    try:
        c = await hub.get("mcp-old")
        assert c.state() == "connected"
    finally:
        await hub.close()
    row = svc.db.one("SELECT config_json FROM connectors WHERE id = 'mcp-old'")
    assert QUERY_SECRET not in row["config_json"] and json.loads(row["config_json"])["url_secret"]
    assert read_secrets(svc.settings.secrets_dir, "mcp-old")["url"] == url
