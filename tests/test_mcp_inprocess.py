"""The MCP connector's seam for its transport (``palui.connectors.mcp.config.TransportFactory``) and the suite's
in-process servers behind it (tests/support/mcp_inprocess.py): which configurations run in the test process,
that what Palui sees there is what the server process would send (raw annotations, both protocol eras), and
that a behaviour only a process has never ends the test process. All in the fast net: nothing here starts a
process or opens a socket (the guard would fail it)."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest

from palui.connectors.mcp import MCPConnector
from palui.connectors.mcp.config import ServerConfig
from support import mcp_inprocess
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool

SUPPORT = HOSTILE.parent


def stdio(*args: str) -> ServerConfig:
    return ServerConfig("stdio", command=sys.executable, args=tuple(args), timeout_seconds=30)


def test_which_configurations_run_in_the_test_process(tmp_path):
    plain = hostile_spec(tmp_path / "plain.json", [tool("echo", annotations=READ)])
    crash = hostile_spec(tmp_path / "crash.json", [tool("boom", "crash")])
    noisy = hostile_spec(tmp_path / "noisy.json", [tool("echo")], stderr_on_start=10)
    assert isinstance(mcp_inprocess.transport(stdio(str(HOSTILE), str(plain))), mcp_inprocess.Wire)
    assert isinstance(mcp_inprocess.transport(stdio(str(SUPPORT / "elicit_new.py"), "--state-key", "11" * 32)),
                      mcp_inprocess.Wire)
    assert isinstance(mcp_inprocess.transport(stdio(str(SUPPORT / "elicit_old.py"))), mcp_inprocess.Wire)
    # What only the server's own process shows stays on stdio: the connector starts the configured command.
    for config in (stdio(str(HOSTILE), str(crash)), stdio(str(HOSTILE), str(noisy)),
                   stdio(str(HOSTILE), str(plain), "--http"), stdio(str(SUPPORT / "books_mcp.py")),
                   stdio("-m", "mcp_server_time"), ServerConfig("http", url="http://127.0.0.1:9/mcp")):
        assert mcp_inprocess.transport(config) is None, config


@pytest.mark.mcp_in_process
@pytest.mark.parametrize("legacy", [False, True], ids=["2026-07-28", "handshake era"])
async def test_the_connector_reaches_the_server_through_the_seam_as_over_stdio(svc, tmp_path, legacy):
    raw = {"readOnlyHint": "true"}  # a string, not a boolean: the SDK's models would make it True
    spec = hostile_spec(tmp_path / "spec.json", [tool("echo", annotations=raw), tool("twice", annotations=READ)],
                        legacy=legacy)
    asked: list[ServerConfig] = []

    def transport(config: ServerConfig):
        asked.append(config)
        return mcp_inprocess.transport(config)

    env = dataclasses.replace(svc._hub.env, mcp_transport=transport)
    config = stdio(str(HOSTILE), str(spec))
    conn = MCPConnector(env, "mcp-h", "h", config)
    try:
        listed = {t.name: t.annotations for t in await conn.list_tools()}
        assert listed == {"echo": raw, "twice": READ}  # as the server wrote them
        assert asked == [config]  # asked once per connection, with the stored configuration
        assert conn._session is not None
        assert conn._session.protocol_version == ("2025-11-25" if legacy else "2026-07-28")
        r = await conn.call_tool("echo", {"q": "ü\u202e"})
        assert (r.is_error, r.text) == (False, "echo: " + json.dumps({"q": "ü\u202e"}, sort_keys=True))
        assert r.untrusted  # results of an untrusted connector, however it is reached
    finally:
        await conn.close()


@pytest.mark.mcp_in_process
async def test_a_behaviour_that_needs_a_process_answers_an_error_in_process(svc, tmp_path):
    spec = hostile_spec(tmp_path / "spec.json", [tool("echo")])
    env = dataclasses.replace(svc._hub.env, mcp_transport=mcp_inprocess.transport)
    conn = MCPConnector(env, "mcp-h", "h", stdio(str(HOSTILE), str(spec)))
    try:
        await conn.list_tools()
        hostile_spec(spec, [tool("echo", "crash")])  # rewritten after the connection was made in process
        r = await conn.call_tool("echo", {})
        assert r.is_error and "needs the server's own process" in r.text  # and the test process lives on
    finally:
        await conn.close()


def test_without_a_factory_the_connectors_use_their_real_transports(svc):
    """A service built as the command line builds it (``Service()``, the ``svc`` of a test not marked
    ``mcp_in_process``) gives its connectors no factory: each uses its configured command or URL."""
    assert svc._hub.env.mcp_transport is None
