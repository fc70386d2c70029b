"""An MCP server over streamable HTTP that restarts while Palui runs (spec §7.10), in both protocol eras.

The server is the mcp SDK's own (tests/support/mcp_hostile.py), killed by its pid and started again on the
same port. In the 2025-11-25 era the restarted server answers the old session id ``404 Session not found``
(the SDK's client would send it for ever); in the 2026-07-28 era there is no session, but a call in flight
still loses its connection. Palui starts one new session; it sends a call again only when the call never
reached the server or the tool only reads; a write whose server went away mid-call is answered "it may
have run", audited ``cancelled; may have run`` and never sent again.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from palui.connectors.mcp.config import ServerConfig
from support.mcp_servers import HOSTILE, READ, WRITE, hostile_spec, tool
from support.scripts import call, calls, text, write_script
from support.waiting import guard

pytestmark = pytest.mark.slow


class RestartingServer:
    """The hostile server over HTTP; :meth:`restart` starts a new process on the same port (SO_REUSEPORT, so
    it listens before the old one is killed by pid) and kills the old one."""

    def __init__(self, spec: Path) -> None:
        self.spec = spec
        self.port = 0
        self.process = self._start()

    def _start(self) -> subprocess.Popen:
        port = ["--port", str(self.port)] if self.port else []
        p = subprocess.Popen([sys.executable, str(HOSTILE), str(self.spec), "--http", *port],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.port = int(p.stdout.readline().split()[1])
        return p

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def restart(self) -> None:
        new = self._start()
        self.process.kill()
        self.process.wait(30)
        self.process = new

    def close(self) -> None:
        self.process.kill()
        self.process.wait(30)


@pytest.fixture(params=["2025-11-25", "2026-07-28"])
def server(request, tmp_path):
    tools = [tool("echo", annotations=READ), tool("slow_read", "hang_first", annotations=READ),
             tool("slow_write", "hang_first", annotations=WRITE)]
    spec = hostile_spec(tmp_path / "restart.json", tools, legacy=request.param == "2025-11-25",
                        calls_log=str(tmp_path / "calls.log"))
    s = RestartingServer(spec)
    s.era = request.param
    s.calls = tmp_path / "calls.log"
    yield s
    s.close()


def delivered(server: RestartingServer, name: str) -> int:
    return server.calls.read_text().split().count(name) if server.calls.exists() else 0


async def wait_until(check, what: str) -> None:
    end = time.monotonic() + guard(0)
    while not check():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def tool_call(r) -> dict:
    [e] = [e for e in r["events"] if e["type"] == "tool_call"]
    return e


async def test_a_restarted_server_is_recovered_and_a_write_cut_mid_call_is_never_sent_again(svc, tmp_path, server):
    await svc.connectors.add_async("work", ServerConfig("http", url=server.url), enable_read=True)
    svc.tools.set_enabled(["mcp-work__slow_write"], True)

    def turn(name: str, **args):
        return svc.turns.send(f"use {name}", model=write_script(tmp_path / f"{name}.json", calls(call(name, **args)),
                                                                text("ok")))

    try:
        first = await turn("mcp-work__echo", n=1)
        assert tool_call(first)["result"] == 'echo: {"n": 1}'
        assert svc._hub.live("mcp-work")._session.protocol_version == server.era

        # Restarted while idle: the next call works (the old session is replaced once, the call sent again:
        # a 404 to the old session id means it never reached the server).
        server.restart()
        if server.era == "2025-11-25":
            # The SDK's GET stream meets the 404 too: the state says the session is lost before any call.
            await wait_until(lambda: next(c for c in svc.connectors.list() if c["id"] == "mcp-work")["state"]
                             .startswith("error: the server lost the session"), "the lost session in the list")
        again = await turn("mcp-work__echo", n=2)
        assert tool_call(again)["result"] == 'echo: {"n": 2}' and not tool_call(again)["is_error"]
        listed = next(c for c in svc.connectors.list() if c["id"] == "mcp-work")
        assert listed["state"] == "connected"
        assert delivered(server, "echo") == 2

        # Restarted again: connectors refresh starts a new session and says so.
        server.restart()
        report = await svc.connectors.refresh_async("mcp-work")
        assert report["state"] == "connected"
        if server.era == "2025-11-25":
            assert "lost the session" in report["recovered"]

        # A read cut mid-call is sent again once, to the new server.
        reading = asyncio.ensure_future(turn("mcp-work__slow_read", n=3))
        await wait_until(lambda: delivered(server, "slow_read") == 1, "the read to reach the server")
        server.restart()
        r = await reading
        assert tool_call(r)["result"] == 'echo: {"n": 3}', tool_call(r)
        assert delivered(server, "slow_read") == 2

        # A write cut mid-call may have run: never sent again, audited so.
        writing = asyncio.ensure_future(turn("mcp-work__slow_write", n=4))
        await wait_until(lambda: delivered(server, "slow_write") == 1, "the write to reach the server")
        server.restart()
        w = await writing
        ev = tool_call(w)
        assert ev["is_error"] and "restarted during the call" in ev["result"] and "it may have run" in ev["result"]
        [row] = [a for a in svc.audit.rows(turn=w["turn"]) if a["tool"] == "mcp-work__slow_write"]
        assert row["outcome"] == "cancelled; may have run"
        assert delivered(server, "slow_write") == 1  # never re-sent
        after = await turn("mcp-work__echo", n=5)
        assert tool_call(after)["result"] == 'echo: {"n": 5}'
    finally:
        await svc.close()


@pytest.fixture
def legacy_server(tmp_path):
    spec = hostile_spec(tmp_path / "restart.json", [tool("echo", annotations=READ)], legacy=True,
                        calls_log=str(tmp_path / "calls.log"))
    s = RestartingServer(spec)
    s.calls = tmp_path / "calls.log"
    yield s
    s.close()


def test_connectors_refresh_reaches_the_service_session(cli_process, home, tmp_path, legacy_server):
    """``palui connectors refresh`` with ``palui serve`` running refreshes the service's own session: the one a
    restarted server lost is started again, and the CLI says so."""
    from support.live_service import LiveService, wait_for

    added = cli_process("connectors", "add", "work", "--url", legacy_server.url, "--enable-read")
    assert added.returncode == 0, added.stderr
    model = write_script(tmp_path / "echo.json", calls(call("mcp-work__echo", n=1)), text("ok"))
    with LiveService(home) as live:
        first = json.loads(cli_process("run", "--json", "--model", model, "echo").stdout)
        assert tool_call(first)["result"] == 'echo: {"n": 1}'
        legacy_server.restart()
        # the service's session meets the 404 on its GET stream: the state it stores says so
        wait_for(lambda: next(c for c in live.get("/api/connectors") if c["id"] == "mcp-work")["state"]
                 .startswith("error: the server lost the session"), what="the lost session")
        r = cli_process("connectors", "refresh", "mcp-work")
        assert r.returncode == 0, r.stderr
        assert "mcp-work: connected" in r.stdout and "recovered:" in r.stdout and "lost the session" in r.stdout
        again = json.loads(cli_process("run", "--json", "--model", model, "echo").stdout)
        assert tool_call(again)["result"] == 'echo: {"n": 1}'
