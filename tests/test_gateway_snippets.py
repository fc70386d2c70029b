"""What ``palui gateway clients add`` prints to paste into an MCP client (docs/gateway.md): the stdio bridge's
command is the full path of this installation's palui (a client starts it without the person's shell, PATH or
virtual environment), and it carries PALUI_HOME when the person uses one."""

from __future__ import annotations

import json
import os

from palui.cli.gateway import snippets


def _stdio(text: str) -> dict:
    part = text.split("Over stdio (a client that starts a command):\n", 1)[1]
    return json.JSONDecoder().raw_decode(part)[0]["mcpServers"]["palui"]


def test_the_stdio_snippet_starts_this_installations_palui_with_the_home(monkeypatch, tmp_path):
    monkeypatch.setenv("PALUI_HOME", str(tmp_path))
    s = _stdio(snippets("coder", "tok", "http://127.0.0.1:8765"))
    assert os.path.isabs(s["command"]) and os.access(s["command"], os.X_OK), s
    assert s["args"][-3:] == ["gateway", "--client", "coder"]
    assert s["env"] == {"PALUI_GATEWAY_TOKEN": "tok", "PALUI_HOME": str(tmp_path.resolve())}


def test_without_palui_home_the_snippet_names_none(monkeypatch):
    monkeypatch.delenv("PALUI_HOME", raising=False)
    assert _stdio(snippets("coder", "tok", "http://127.0.0.1:8765"))["env"] == {"PALUI_GATEWAY_TOKEN": "tok"}
