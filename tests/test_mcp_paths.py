"""A relative stdio command keeps working from any directory: ``connectors add`` stores it
resolved against the current directory, ``connectors import FILE`` against the file's directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from palui.connectors.mcp.config import ServerConfig
from palui.service.connectors import absolute_paths
from support.inprocess import palui
from support.mcp_servers import HOSTILE, READ, hostile_spec, tool


def _server_script(project: Path) -> Path:
    """``PROJECT/bin/srv``: an executable that starts the hostile test server with one read tool."""
    project.mkdir()
    spec = hostile_spec(project / "spec.json", [tool("echo", annotations=READ)])
    script = project / "bin" / "srv"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!/bin/sh\nexec '{sys.executable}' '{HOSTILE}' '{spec}'\n")
    script.chmod(0o755)
    return script


def _palui(home: Path, cwd: Path, *args: str, process: bool = False) -> subprocess.CompletedProcess:
    return palui(home, *args, cwd=cwd, process=process)


@pytest.mark.slow
def test_added_relative_command_works_from_another_directory(home, tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    script = _server_script(project)
    elsewhere.mkdir()
    # A real process: the relative command is resolved against that process's working directory.
    r = _palui(home, project, "connectors", "add", "rel", "--", "bin/srv", "--some-arg", process=True)
    assert r.returncode == 0, r.stderr
    cfg = json.loads(_palui(home, elsewhere, "connectors", "show", "mcp-rel", "--json").stdout)
    assert (cfg["command"], cfg["args"]) == (str(script), ["--some-arg"])  # arguments are left as they are
    r = _palui(home, elsewhere, "connectors", "refresh", "mcp-rel")
    assert r.returncode == 0 and "mcp-rel: connected" in r.stdout, r.stderr


@pytest.mark.slow
def test_imported_relative_command_is_relative_to_the_file(home, tmp_path):
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    script = _server_script(project)
    elsewhere.mkdir()
    conf = project / "conf" / "servers.json"
    conf.parent.mkdir()
    conf.write_text(json.dumps({"mcpServers": {"rel": {"command": "../bin/srv"}}}))
    r = _palui(home, elsewhere, "connectors", "import", str(conf))
    assert r.returncode == 0 and "rel: added (mcp-rel)" in r.stdout, r.stdout + r.stderr
    cfg = json.loads(_palui(home, tmp_path, "connectors", "show", "mcp-rel", "--json").stdout)
    assert cfg["command"] == str(script)


@pytest.mark.parametrize("command,cwd,want_command,want_cwd", [
    ("npx", None, "npx", None),                                   # a bare name is found on PATH
    ("/opt/srv", None, "/opt/srv", None),                         # absolute: as it is
    (".venv/bin/mcp-server-time", None, "/base/.venv/bin/mcp-server-time", None),
    ("./srv", None, "/base/srv", None),
    ("../bin/srv", None, "/bin/srv", None),                       # normalised, no symlink followed
    ("./srv", "/work", "/work/srv", "/work"),                     # the process starts in cwd
    ("bin/srv", "sub", "/base/sub/bin/srv", "/base/sub"),         # a relative cwd is relative to the base
    ("srv", "sub", "srv", "/base/sub"),
])
def test_absolute_paths(command, cwd, want_command, want_cwd):
    c = absolute_paths(ServerConfig("stdio", command=command, args=("./data",), cwd=cwd), "/base")
    assert (c.command, c.cwd, c.args) == (want_command, want_cwd, ("./data",))


def test_absolute_paths_expands_home_and_leaves_http_alone(monkeypatch):
    monkeypatch.setenv("HOME", "/home/p")
    assert absolute_paths(ServerConfig("stdio", command="~/bin/srv"), "/base").command == "/home/p/bin/srv"
    http = ServerConfig("http", url="https://example.org/mcp")
    assert absolute_paths(http, "/base") is http
