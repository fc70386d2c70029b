"""Scripted turns through a real MCP server (spec §7.3): @modelcontextprotocol/server-filesystem over stdio.

The person's path: ``palui connectors add`` + ``palui tools enable-read``, then ``palui run``
with a ``script:`` model. Shows: a read tool returns the real result (and taints the turn),
a write tool asks in a tainted turn, a destructive tool asks in a clean turn and runs once
after approval, and an off tool is never offered and a call to it never reaches the server.
"""

from __future__ import annotations

import json

import pytest

from support.mcp_servers import node_server
from support.scripts import call, calls, text, write_script

pytestmark = pytest.mark.slow


@pytest.fixture
def fs(cli, tmp_path):
    server = node_server("mcp-server-filesystem")
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("Palui notes: the door code is 4711\n")
    r = cli("connectors", "add", "fs", "--enable-read", "--", str(server), str(files))
    assert r.returncode == 0, r.stderr
    return files


def tool_events(out):
    return [(e["tool"], e["verdict"], e["is_error"]) for e in out["events"] if e["type"] == "tool_call"]


def test_read_tool_returns_the_real_result_and_taints(cli, tmp_path, fs):
    tools = {t["name"]: t for t in cli.json("tools", "list", "--connector", "mcp-fs", "--json")}
    assert tools["mcp-fs__read_text_file"]["class"] == "read" and tools["mcp-fs__read_text_file"]["enabled"]
    assert tools["mcp-fs__write_file"]["class"] == "destructive" and not tools["mcp-fs__write_file"]["enabled"]
    assert tools["mcp-fs__create_directory"]["class"] == "write"
    model = write_script(tmp_path / "s.json",
                         calls(call("mcp-fs__read_text_file", path=str(fs / "notes.txt"))), text("Read it."))
    out = json.loads(cli("run", "--json", "--model", model, "read my notes").stdout)
    assert out["status"] == "done", out
    [ev] = [e for e in out["events"] if e["type"] == "tool_call"]
    assert ev["verdict"] == "run" and not ev["is_error"]
    assert "the door code is 4711" in ev["result"]
    assert out["tainted"] and "mcp-fs__read_text_file" in out["taint_source"]


def test_write_asks_when_tainted_and_off_tool_never_reaches_the_server(cli, tmp_path, fs):
    assert cli("tools", "enable", "mcp-fs__create_directory").returncode == 0
    target = fs / "moved.txt"
    model = write_script(
        tmp_path / "s.json",
        calls(call("mcp-fs__read_text_file", path=str(fs / "notes.txt")),
              call("mcp-fs__move_file", source=str(fs / "notes.txt"), destination=str(target)),
              call("mcp-fs__create_directory", path=str(fs / "archive"))),
        text("Done."))
    out = json.loads(cli("run", "--json", "--model", model, "tidy up").stdout)
    offered = out["events"][0]["tools_offered"]
    assert "mcp-fs__move_file" not in offered  # off (new MCP tools start off; it is not read)
    assert tool_events(out) == [("mcp-fs__read_text_file", "run", False), ("mcp-fs__move_file", "off", True)]
    assert not target.exists() and (fs / "notes.txt").exists()  # the refused call never reached the server
    assert out["status"] == "awaiting_approval"
    [a] = out["pending_approvals"]
    assert a["tool"] == "mcp-fs__create_directory" and "tainted" in a["reason"]
    assert not (fs / "archive").exists()
    r = cli("approvals", "approve", a["id"])
    assert r.returncode == 0, r.stderr
    assert (fs / "archive").is_dir()


def test_destructive_asks_in_a_clean_turn_and_runs_once(cli, tmp_path, fs):
    assert cli("tools", "enable", "mcp-fs__write_file").returncode == 0
    model = write_script(tmp_path / "s.json",
                         calls(call("mcp-fs__write_file", path=str(fs / "todo.txt"), content="water the plants")),
                         text("Written."))
    out = json.loads(cli("run", "--json", "--model", model, "write my todo").stdout)
    assert out["status"] == "awaiting_approval" and not out["tainted"]
    [a] = out["pending_approvals"]
    assert a["reason"] == "ask: destructive tool in a chat turn"
    assert not (fs / "todo.txt").exists()
    r = cli("approvals", "approve", "--json", a["id"])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "Written."
    assert (fs / "todo.txt").read_text() == "water the plants"
    assert cli("approvals", "approve", a["id"]).returncode == 1
    ran = [x for x in cli.json("audit", "--json") if x["tool"] == "mcp-fs__write_file" and x["outcome"].endswith("ok")]
    assert len(ran) == 1
