"""Real MCP servers, driven the way a person would: one ``palui connectors import`` of an
``mcpServers`` file, ``palui tools list --json``, then real calls through Connector.call_tool.

Servers: mcp-server-time and mcp-server-git (PyPI, 2026-07-28 era), server-filesystem,
server-memory and server-everything (npm, initialize era) over stdio, and
server-everything over streamable HTTP. Each is imported once for the module.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time

import pytest
import pytest_asyncio

from palui.config import load_settings
from palui.connectors.hub import ConnectorHub
from palui.connectors.mcp import MCPConnector
from support.mcp_servers import node_server, palui, palui_json, python_server

pytestmark = pytest.mark.slow
in_module_loop = pytest.mark.asyncio(loop_scope="module")  # the hub and its sessions live for the module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A PALUI_HOME with the real servers imported from one mcpServers file."""
    servers = {
        "time": python_server("mcp-server-time"), "git": python_server("mcp-server-git"),
        "fs": node_server("mcp-server-filesystem"), "memory": node_server("mcp-server-memory"),
        "everything": node_server("mcp-server-everything"),
    }
    base = tmp_path_factory.mktemp("mcp-real")
    home, files, repo = base / "home", base / "files", base / "repo"
    home.mkdir()
    files.mkdir()
    (files / "notes.txt").write_text("the notes Palui wrote\n")
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "README").write_text("hello\n")
    git = ["git", "-C", str(repo), "-c", "user.name=T", "-c", "user.email=t@example.org"]
    subprocess.run(git + ["add", "README"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "first commit by the test"], check=True)

    port = _free_port()
    http = subprocess.Popen([str(servers["everything"]), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while "listening" not in (http.stderr.readline() or "") and time.monotonic() < deadline:
            assert http.poll() is None, "server-everything (HTTP) exited"
        servers_file = base / "servers.json"
        servers_file.write_text(json.dumps({"mcpServers": {
            "time": {"command": "${T_PY}/mcp-server-time"},
            "git": {"command": "${T_PY}/mcp-server-git", "args": ["--repository", "${T_REPO}"]},
            "files": {"command": "${T_NODE}/mcp-server-filesystem", "args": ["${T_FILES}"]},
            "memory": {"command": "${T_NODE}/mcp-server-memory", "env": {"MEMORY_FILE_PATH": "${T_MEMORY}"}},
            "everything": {"command": "${T_NODE}/mcp-server-everything", "autoApprove": ["echo"]},
            "everything-http": {"url": "http://127.0.0.1:${T_PORT}/mcp", "type": "http"},
        }}))
        env = {"T_PY": str(servers["time"].parent), "T_NODE": str(servers["fs"].parent), "T_REPO": str(repo),
               "T_FILES": str(files), "T_MEMORY": str(base / "memory.jsonl"), "T_PORT": str(port)}
        imported = palui_json(home, "connectors", "import", str(servers_file), "--json", env=env)
        tools = {t["name"]: t for t in palui_json(home, "tools", "list", "--json")}
        yield {"home": home, "files": files, "repo": repo, "imported": imported, "tools": tools, "port": port}
    finally:
        http.terminate()
        http.wait(10)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def hub(world):
    from palui.service import Service

    svc = Service(load_settings({"PALUI_HOME": str(world["home"])}))
    h = ConnectorHub(svc._hub.env)
    yield h
    await h.close()
    svc.db.close()


def test_import_added_every_server(world):
    statuses = {r["name"]: (r["status"], r["id"]) for r in world["imported"]}
    assert statuses == {
        "time": ("added", "mcp-time"), "git": ("added", "mcp-git"), "files": ("added", "mcp-files"),
        "memory": ("added", "mcp-memory"), "everything": ("added", "mcp-everything"),
        "everything-http": ("added", "mcp-everything-http"),
    }
    listed = palui_json(world["home"], "connectors", "list", "--json")
    mcp = {c["id"]: c for c in listed if c["kind"] == "mcp"}
    # Not started by this `connectors list` process: idle (spec §7); the add's connection was stored.
    assert {c["state"] for c in mcp.values()} == {"idle"}
    assert {c["last_state"] for c in mcp.values()} == {"connected"}
    # Env values are secrets: the list shows the key, never the value.
    assert mcp["mcp-memory"]["config"]["env"] == {"MEMORY_FILE_PATH": "***"}
    assert "memory.jsonl" not in json.dumps(listed)


@pytest.mark.parametrize("name,cls", [
    ("mcp-time__get_current_time", "read"), ("mcp-time__convert_time", "read"),
    ("mcp-git__git_status", "read"), ("mcp-git__git_log", "read"), ("mcp-git__git_commit", "write"),
    ("mcp-git__git_add", "write"), ("mcp-git__git_reset", "destructive"),
    ("mcp-files__read_text_file", "read"), ("mcp-files__list_directory", "read"),
    ("mcp-files__write_file", "destructive"), ("mcp-files__move_file", "destructive"),
    ("mcp-files__create_directory", "write"),
    ("mcp-memory__read_graph", "read"), ("mcp-memory__create_entities", "write"),
    ("mcp-memory__delete_entities", "destructive"),
    ("mcp-everything__echo", "read"), ("mcp-everything__toggle-simulated-logging", "write"),
    ("mcp-everything-http__echo", "read"), ("mcp-everything-http__get-sum", "read"),
])
def test_classes_from_real_annotations(world, name, cls):
    t = world["tools"][name]
    assert (t["class"], t["class_source"]) == (cls, "hints")
    assert t["enabled"] is False  # new MCP tools start off
    assert t["untrusted_output"] is True


def test_raw_annotations_are_stored_as_sent(world):
    # filesystem's read tools send readOnlyHint without destructiveHint: absent, not false.
    assert world["tools"]["mcp-files__read_text_file"]["annotations"] == {"readOnlyHint": True,
                                                                          "openWorldHint": False}
    assert world["tools"]["mcp-files__write_file"]["annotations"]["destructiveHint"] is True


def test_only_elicitation_advertised(world):
    # server-everything lists two more tools to a client advertising elicitation (spec §7.3), and the
    # sampling and roots ones only to clients advertising those, which Palui never does.
    names = [n for n in world["tools"] if n.startswith("mcp-everything__")]
    assert len(names) == 15
    assert sorted(n for n in names if re.search(r"elicit", n)) == [
        "mcp-everything__trigger-elicitation-request", "mcp-everything__trigger-url-elicitation"]
    assert not [n for n in names if re.search(r"sampl|root", n)]


@in_module_loop
async def test_time_call(hub):
    conn = await hub.get("mcp-time")
    assert isinstance(conn, MCPConnector) and conn.state() == "connected"
    r = await conn.call_tool("get_current_time", {"timezone": "UTC"})
    assert not r.is_error and r.untrusted is True
    assert json.loads(r.text)["timezone"] == "UTC"
    bad = await conn.call_tool("get_current_time", {"timezone": "Nowhere/Atlantis"})
    assert bad.is_error and "Atlantis" in bad.text and bad.untrusted is True
    assert await hub.get("mcp-time") is conn  # reused, not restarted


@in_module_loop
async def test_filesystem_read_and_write(hub, world):
    conn = await hub.get("mcp-files")
    r = await conn.call_tool("read_text_file", {"path": str(world["files"] / "notes.txt")})
    assert (r.is_error, r.text) == (False, "the notes Palui wrote\n")
    r = await conn.call_tool("write_file", {"path": str(world["files"] / "new.txt"), "content": "written"})
    assert not r.is_error
    assert (world["files"] / "new.txt").read_text() == "written"
    outside = await conn.call_tool("read_text_file", {"path": "/etc/hostname"})
    assert outside.is_error  # no roots given: the server keeps its own allowed directory


@in_module_loop
async def test_git_log(hub, world):
    conn = await hub.get("mcp-git")
    r = await conn.call_tool("git_log", {"repo_path": str(world["repo"])})
    assert not r.is_error and "first commit by the test" in r.text


@in_module_loop
async def test_memory_round_trip(hub):
    conn = await hub.get("mcp-memory")
    r = await conn.call_tool("create_entities", {"entities": [
        {"name": "Palui", "entityType": "project", "observations": ["governs its tools"]}]})
    assert not r.is_error
    r = await conn.call_tool("read_graph", {})
    assert not r.is_error and "governs its tools" in r.text


@in_module_loop
async def test_everything_over_stdio_and_http(hub):
    for cid in ("mcp-everything", "mcp-everything-http"):
        conn = await hub.get(cid)
        r = await conn.call_tool("echo", {"message": "hello from Palui"})
        assert (r.is_error, r.text) == (False, "Echo: hello from Palui"), cid
        r = await conn.call_tool("get-sum", {"a": 2, "b": 3})
        assert not r.is_error and "5" in r.text


def test_trusted_source_and_refresh_via_cli(world):
    home = world["home"]
    r = palui(home, "connectors", "trust", "mcp-files", "--tool", "read_text_file")
    assert r.returncode == 0, r.stderr
    tools = {t["name"]: t for t in palui_json(home, "tools", "list", "--json", "--connector", "mcp-files")}
    assert tools["mcp-files__read_text_file"]["untrusted_output"] is False
    assert tools["mcp-files__read_file"]["untrusted_output"] is True
    report = palui_json(home, "connectors", "refresh", "mcp-files", "--json")
    assert (report["state"], report["added"], report["changed"], report["removed"]) == ("connected", [], [], [])
