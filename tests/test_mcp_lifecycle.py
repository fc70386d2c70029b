"""MCP connector lifecycle against servers of their own: the handshake era (initialize, after
``server/discover`` is refused), streamable HTTP with secret headers, servers that cannot start or
never answer the handshake (clear errors, nothing stored, back-off), the mcpServers import's errors,
and ``connectors remove``. Hostile servers come from tests/support/mcp_hostile.py (the mcp SDK)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import subprocess
import sys

import pytest

from palui.config import load_settings
from palui.connectors.base import ToolSpec
from palui.connectors.hub import ConnectorHub
from palui.connectors.mcp import MCPConnector
from palui.connectors.mcp.config import ServerConfig, write_secrets
from palui.connectors.mcp.stderr import log_path
from palui.errors import ConnectorError, NotFound, UsageError
from support.mcp_servers import DESTRUCTIVE, HOSTILE, READ, WRITE, hostile_spec, palui, palui_json, tool

pytestmark = pytest.mark.slow

SECRET = "sekrit-value-4242"




async def test_legacy_era_and_list_changed(svc, tmp_path):
    spec = hostile_spec(tmp_path / "legacy.json", [tool("old", annotations=READ), tool("mutate", "mutate", WRITE),
                                                   tool("caps", "caps", READ)], legacy=True)
    conn = MCPConnector(svc._hub.env, "mcp-legacy", "Legacy", ServerConfig("stdio", command=sys.executable,
                                                                  args=(str(HOSTILE), str(spec))))
    try:
        await conn.start()  # the first connection registers the connector and its tools
        assert conn._session.protocol_version == "2025-11-25"  # initialize, after discover was refused
        caps = json.loads((await conn.call_tool("caps", {})).text)
        assert caps == {"elicitation": {"form": {}, "url": {}}}, caps  # spec §7: no sampling, no roots
        r = await conn.call_tool("mutate", {"tools": [tool("old", annotations=READ, description="new text"),
                                                      tool("mutate", "mutate", WRITE), tool("caps", "caps", READ)]})
        assert r.text == "mutated"
        for _ in range(100):
            if next(t for t in svc.tools.list("mcp-legacy") if t.tool == "old").changed:
                break
            await asyncio.sleep(0.05)
        assert next(t for t in svc.tools.list("mcp-legacy") if t.tool == "old").changed
    finally:
        await conn.close()
        svc.connectors.remove("mcp-legacy")


@pytest.fixture
def http_server(tmp_path):
    spec = hostile_spec(tmp_path / "http.json", [tool("echo", annotations=READ), tool("wipe", annotations=DESTRUCTIVE)],
                        require_header=["Authorization", "Bearer " + SECRET])
    p = subprocess.Popen([sys.executable, str(HOSTILE), str(spec), "--http"], stdout=subprocess.PIPE, text=True)
    try:
        port = int(p.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/mcp", p
    finally:
        p.terminate()
        p.wait(10)


async def test_streamable_http_with_secret_headers(http_server, home):
    from palui.service import Service

    http_server, process = http_server

    wrong = palui(home, "connectors", "add", "web", "--url", http_server, "--header", "Authorization=Bearer nope")
    assert wrong.returncode == 1 and "refused the MCP handshake" in wrong.stderr
    s = Service(load_settings({"PALUI_HOME": str(home)}))
    assert not [c for c in s.connectors.list() if c["kind"] == "mcp"]  # nothing stored
    added = palui_json(home, "connectors", "add", "web", "--url", http_server, "--timeout", "7.5", "--enable-read",
                       "--max-output", "120", "--header", "Authorization=Bearer ${TOK}", "--json", env={"TOK": SECRET})
    assert (added["id"], added["transport"], added["enabled"]) == ("mcp-web", "http", ["mcp-web__echo"])
    web = next(c for c in s.connectors.list() if c["id"] == "mcp-web")
    assert web["config"]["headers"] == {"Authorization": "***"} and SECRET not in json.dumps(web)
    assert {t.name: (t.tool_class.value, t.enabled) for t in s.tools.list("mcp-web")} == {
        "mcp-web__echo": ("read", True), "mcp-web__wipe": ("destructive", False)}  # --enable-read: read tools only
    hub = ConnectorHub(s._hub.env)
    try:
        c = await hub.get("mcp-web")
        assert c.state() == "connected"
        assert (c.timeout, c.max_output) == (7.5, 120)  # the per-connector overrides
        assert (await c.call_tool("echo", {"via": "http"})).text == 'echo: {"via": "http"}'
        long = await c.call_tool("echo", {"text": "y" * 500})
        assert len(long.text.encode()) <= 120 and "[output truncated by Palui" in long.text
        process.kill()
        process.wait(10)
        gone = await c.call_tool("echo", {})  # refused at connect: never sent, one new session tried (spec §7.10)
        assert gone.is_error and "could not be reached" in gone.text and not gone.may_have_run
        again = await c.call_tool("echo", {})
        assert again.is_error and "could not be reached" in again.text
        assert c.state().startswith("error: the server could not be reached")
    finally:
        await hub.close()
        s.db.close()


def test_server_that_cannot_start_stores_nothing(home):
    from palui.service import Service

    r = palui(home, "connectors", "add", "ghost", "--", "/no/such/server", "--flag")
    assert r.returncode == 1 and "command '/no/such/server' not found" in r.stderr
    script = "import os, sys; print('token is', os.environ['TOKEN'], file=sys.stderr); sys.exit(3)"
    # A real process: what a server child prints must not reach the command's own output either.
    r = palui(home, "connectors", "add", "leaky", "--env", "TOKEN=" + SECRET, "--", sys.executable, "-c", script,
              process=True)
    assert r.returncode == 1
    assert "exited (or closed the connection) during the MCP handshake" in r.stderr
    assert "token is ***" in r.stderr and SECRET not in r.stderr
    s = Service(load_settings({"PALUI_HOME": str(home)}))
    assert [c["id"] for c in s.connectors.list() if c["kind"] == "mcp"] == []
    assert not list((home / "secrets").glob("*.json"))
    s.db.close()


async def test_start_failures_back_off_and_handshake_hangs_time_out(svc, tmp_path):
    starts = tmp_path / "starts"  # one line per start of the server: a refused start spawns nothing
    exits = f"open({str(starts)!r}, 'a').write('start\\n'); raise SystemExit(1)"
    dead = MCPConnector(svc._hub.env, "mcp-dead", "dead", ServerConfig("stdio", command=sys.executable,
                                                                args=("-c", exits)))
    try:
        with pytest.raises(ConnectorError, match="during the MCP handshake"):
            await dead.start()
        assert dead.state().startswith("error: the server exited")
        r = await dead.call_tool("anything", {})  # the first retry is immediate…
        assert r.is_error and "during the MCP handshake" in r.text
        assert starts.read_text().count("start") == 2
        r = await dead.call_tool("anything", {})  # …then it waits before trying again
        assert r.is_error and "next start attempt is in" in r.text
        assert starts.read_text().count("start") == 2  # refused at once: no third start
    finally:
        await dead.close()
    mute = MCPConnector(svc._hub.env, "mcp-mute", "mute", ServerConfig("stdio", command=sys.executable,
                                                                args=("-c", "import sys; sys.stdin.read()"),
                                                                timeout_seconds=1.0))
    try:
        r = await mute.call_tool("anything", {})  # a server that never answers: only the timeout ends this
        assert r.is_error and re.search(r"did not finish the MCP handshake within [\d.]+ s", r.text), r.text
    finally:
        await mute.close()


async def test_hub_raises_for_a_server_that_cannot_start_and_backs_off(svc, tmp_path):
    cid = "mcp-broken"
    svc.tools.register(cid, [], name="broken", kind="mcp")
    starts = tmp_path / "starts"  # one line per start of the server: a refused start spawns nothing
    config = ServerConfig("stdio", command=sys.executable,
                          args=("-c", f"open({str(starts)!r}, 'a').write('start\\n'); raise SystemExit(2)"))
    with svc.db.write() as c:
        c.execute("UPDATE connectors SET transport = 'stdio', config_json = ? WHERE id = ?",
                  (json.dumps(config.public()), cid))
    try:
        for _ in range(2):  # the first failure is retried at once on the next use…
            with pytest.raises(ConnectorError, match="during the MCP handshake"):
                await svc._hub.get(cid)
        assert next(c for c in svc.connectors.list() if c["id"] == cid)["last_state"].startswith("error: ")
        with pytest.raises(ConnectorError, match="next start attempt is in"):  # …then it waits
            await svc._hub.get(cid)
        assert starts.read_text().count("start") == 2  # refused at once: no third start
    finally:
        svc.connectors.remove(cid)


def test_import_errors_name_the_variable_and_add_nothing(home, tmp_path):
    f = tmp_path / "servers.json"
    f.write_text(json.dumps({"mcpServers": {
        "ok": {"command": sys.executable, "args": [str(HOSTILE), "x"]},
        "notes": {"command": "notes-mcp", "env": {"API_KEY": "${PALUI_TEST_UNSET_VAR}"}}}}))
    r = palui(home, "connectors", "import", str(f))
    assert r.returncode == 2
    assert "server 'notes': env API_KEY: environment variable PALUI_TEST_UNSET_VAR is not set" in r.stderr
    assert [c for c in palui_json(home, "connectors", "list", "--json") if c["kind"] == "mcp"] == []
    assert re.search(r"SSE transport is not supported", palui(
        home, "connectors", "import", str(_write(tmp_path / "sse.json", {"mcpServers": {"s": {"url": "http://x/sse",
                                                                                            "type": "sse"}}}))
    ).stderr)



def _write(path, data):
    path.write_text(json.dumps(data))
    return path


def test_remove_forgets_row_tools_secrets_and_logs(svc, home):
    cid = "mcp-temp"
    svc.tools.register(cid, [ToolSpec("echo", "", {}, READ)], name="Temp", kind="mcp")
    write_secrets(svc.settings.secrets_dir, cid, {"env": {"K": "value-1234"}, "headers": {}})
    log = log_path(svc.settings.data_dir, cid)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("old stderr\n")
    r = palui(home, "connectors", "remove", cid)
    assert r.returncode == 0, r.stderr
    assert svc.db.one("SELECT 1 FROM connectors WHERE id = ?", (cid,)) is None
    assert svc.db.one("SELECT 1 FROM tools WHERE connector_id = ?", (cid,)) is None
    assert not (svc.settings.secrets_dir / f"{cid}.json").exists() and not log.exists()
    with pytest.raises(UsageError, match="built-in"):
        svc.connectors.remove("recall")
    with pytest.raises(NotFound):
        svc.connectors.remove("mcp-nope")


async def test_a_decided_call_is_sent_without_reading_its_tool_again(svc, tmp_path):
    # The runner hands the connector the tool's row it read when it decided the call (CallContext.tool): the
    # call reads neither the tool nor its connector's sign-in state again, and its taint follows that row.
    # Without the row (or with another tool's), the connector reads the stored flags itself.
    from palui.connectors.base import CallContext
    from palui.types import Origin

    spec = hostile_spec(tmp_path / "s.json", [tool("echo", annotations=READ), tool("other", annotations=READ)])
    conn = MCPConnector(svc._hub.env, "mcp-reads", "Reads", ServerConfig("stdio", command=sys.executable,
                                                                          args=(str(HOSTILE), str(spec))))
    try:
        await conn.start()
        rows = {t.tool: t for t in svc.tools.list("mcp-reads")}

        async def call(row):
            ctx = CallContext(turn_id="t", conversation_id="c", origin=Origin.CHAT, tainted=False, taint_source=None,
                              step=1, db=svc.db, settings=svc.settings, tool=row)
            seen: list[str] = []
            svc.db._connect().set_trace_callback(seen.append)
            try:
                r = await conn.call_tool("echo", {"x": 1}, ctx)
            finally:
                svc.db._connect().set_trace_callback(None)
            assert not r.is_error, r.text
            return r, [s for s in seen if re.search(r"FROM (tools|connectors)\b", s)]

        r, reads = await call(rows["echo"])
        assert reads == [] and r.untrusted is True  # an MCP tool's output is untrusted (spec §4)
        trusted = dataclasses.replace(rows["echo"], connector_trusted=True)
        assert (await call(trusted))[0].untrusted is False  # the flags come from the row it was given
        for row in (None, rows["other"]):
            r, reads = await call(row)
            assert reads and r.untrusted is True
    finally:
        await conn.close()
        svc.connectors.remove("mcp-reads")
