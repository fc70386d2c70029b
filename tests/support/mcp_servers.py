"""Where the real MCP servers of the tests live, and small helpers shared by the MCP tests.

Python servers (``mcp-server-time``, ``mcp-server-git``) come with the ``test`` extra
into the same environment as pytest; npm servers are installed into ``.mcp-servers``
(``npm ci --prefix .mcp-servers``, which .ci/run does). A missing server skips its test
with a loud reason, except under CI (``CI`` set), where it fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support import inprocess

ROOT = Path(__file__).resolve().parents[2]
PY_BIN = Path(sys.executable).parent
NODE_BIN = ROOT / ".mcp-servers" / "node_modules" / ".bin"
HOSTILE = Path(__file__).resolve().parent / "mcp_hostile.py"


def require(path: Path, how: str) -> Path:
    """``path`` if it exists; else skip (fail under CI) naming how to install it."""
    if not path.exists():
        message = f"MCP server {path.name} is not installed ({path}); install it with: {how}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def python_server(name: str) -> Path:
    return require(PY_BIN / name, f"{sys.executable} -m pip install -e '.[test]'")


def node_server(name: str) -> Path:
    return require(NODE_BIN / name, "npm ci --prefix .mcp-servers")


def palui(home: Path, *args: str, env: dict | None = None, timeout: float = 120,
          process: bool = False) -> subprocess.CompletedProcess:
    """Run the ``palui`` command line with PALUI_HOME=home: in this process (``support/inprocess.py``), or
    as ``python -m palui`` in a child with ``process=True``."""
    return inprocess.palui(home, *args, env=env, timeout=timeout, process=process)


def palui_json(home: Path, *args: str, **kw):
    r = palui(home, *args, **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def hostile_spec(path: Path, tools: list[dict], **extra) -> Path:
    """Write a spec file for :mod:`mcp_hostile` and return its path."""
    path.write_text(json.dumps({"tools": tools, **extra}))
    return path


def tool(name: str, behaviour: str = "echo", annotations: dict | None = None, description: str | None = None,
         schema: dict | None = None) -> dict:
    """One hostile-server tool entry; ``annotations=None`` sends none at all."""
    t = {"name": name, "description": description if description is not None else f"{name} tool",
         "inputSchema": schema or {"type": "object", "properties": {}}, "behaviour": behaviour}
    if annotations is not None:
        t["annotations"] = annotations
    return t


READ = {"readOnlyHint": True}
WRITE = {"readOnlyHint": False, "destructiveHint": False}
DESTRUCTIVE = {"destructiveHint": True}
