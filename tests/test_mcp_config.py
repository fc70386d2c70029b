"""MCP pieces that need no server: the mcpServers import format and ${VAR} expansion, command-line
pairs, secrets files and redaction, raw listings, result rendering, the output cap, back-off, and
the capped stderr log under a flood."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import mcp_types as types
import pytest

from palui.config_schema import value_for
from palui.connectors.mcp.config import (
    ServerConfig,
    expand,
    parse_mcp_servers,
    parse_pairs,
    read_secrets,
    redact,
    write_secrets,
)
from palui.connectors.mcp.connector import backoff_seconds
from palui.connectors.mcp.results import cap_text, render_result, spec_from_raw
from palui.connectors.mcp.stderr import StderrCapture
from palui.errors import ConnectorError, UsageError
from palui.policy.classify import prefill_class
from palui.types import ToolClass

ENV = {"TOKEN": "t0k3n-value", "DIR": "/srv/notes"}


def test_import_format_with_expansion():
    servers = parse_mcp_servers({"mcpServers": {
        "notes": {"command": "notes-mcp", "args": ["--root", "${DIR}", "$$HOME"], "env": {"API": "${TOKEN}"},
                  "autoApprove": ["everything"], "disabled": False},
        "remote": {"url": "https://example.org/mcp?x=${DIR}", "headers": {"Authorization": "Bearer ${TOKEN}"},
                   "type": "streamable-http"},
    }}, ENV)
    (n1, notes), (n2, remote) = servers
    assert (n1, notes.transport, notes.command, notes.args) == ("notes", "stdio", "notes-mcp",
                                                                ("--root", "/srv/notes", "$HOME"))
    assert notes.env == {"API": "t0k3n-value"}
    assert (n2, remote.transport, remote.url) == ("remote", "http", "https://example.org/mcp?x=/srv/notes")
    assert remote.headers == {"Authorization": "Bearer t0k3n-value"}
    # Secrets stay out of the stored config: keys only.
    assert notes.public()["env_keys"] == ["API"] and "t0k3n" not in json.dumps(notes.public())
    assert remote.public()["header_keys"] == ["Authorization"] and "t0k3n" not in json.dumps(remote.public())


@pytest.mark.parametrize("data,message", [
    ({"mcpServers": {"a": {"command": "x", "env": {"K": "${NOPE}"}}}},
     "server 'a': env K: environment variable NOPE is not set"),
    ({"mcpServers": {"a": {"url": "${NOPE}/mcp"}}}, "server 'a': url: environment variable NOPE is not set"),
    ({"mcpServers": {"a": {"url": "http://h/sse", "type": "sse"}}}, "SSE transport is not supported"),
    ({"mcpServers": {"a": {"url": "http://h", "command": "x"}}}, "either \"command\""),
    ({"mcpServers": {"a": {}}}, "either \"command\""),
    ({"mcpServers": {"a": {"command": "x", "args": "--flag"}}}, "args: must be a list of strings"),
    ({"mcpServers": {"a": {"url": "ftp://h"}}}, "must start with http"),
    ({"servers_typo": {}}, "\"mcpServers\" object"),
    ([], "\"mcpServers\" object"),
])
def test_import_errors_are_clear(data, message):
    with pytest.raises(UsageError) as e:
        parse_mcp_servers(data, {})
    assert message in str(e.value)


def test_missing_variable_error_never_shows_values():
    with pytest.raises(UsageError) as e:
        parse_mcp_servers({"mcpServers": {"a": {"command": "x", "env": {"A": "${TOKEN}", "B": "${MISSING}"}}}}, ENV)
    assert "MISSING" in str(e.value) and "t0k3n" not in str(e.value)


def test_command_line_pairs():
    assert parse_pairs(["A=1", "TOKEN", "C=x=${DIR}"], "--env", ENV) == {"A": "1", "TOKEN": "t0k3n-value",
                                                                       "C": "x=/srv/notes"}
    with pytest.raises(UsageError, match="environment variable MISSING"):
        parse_pairs(["MISSING"], "--env", ENV)
    with pytest.raises(UsageError, match="expected Authorization=VALUE"):
        parse_pairs(["Authorization"], "--header", ENV)
    assert expand("$${X} ${DIR}", ENV, "w") == "${X} /srv/notes"


def test_config_checks():
    with pytest.raises(UsageError, match="needs a command"):
        ServerConfig("stdio")
    # A connector's own limits are held to their keys' ranges where it is added (spec §10.4).
    with pytest.raises(UsageError, match="timeout_seconds: must be greater than 0 and at most 86,400 seconds"):
        value_for("mcp.call_timeout_seconds", 0, "timeout_seconds")
    with pytest.raises(UsageError, match="timeout_seconds: must be a finite number"):
        value_for("mcp.call_timeout_seconds", float("inf"), "timeout_seconds")
    with pytest.raises(UsageError, match="max_output_bytes: must be greater than 0 and at most 104,857,600 bytes"):
        value_for("mcp.max_output_bytes", -1, "max_output_bytes")
    for config, said in [
        (ServerConfig("stdio", command="x", args=("ok", "a\x00b")), r"argument 2 .* \(U\+0000 at character 2\)"),
        (ServerConfig("stdio", command="x", cwd="/tmp/\x1b[2J"), r"working directory .* \(U\+001B at character 6\)"),
        (ServerConfig("http", url="http://h/\nx"), r"the URL must not contain control characters \(U\+000A"),
        (ServerConfig("http", url="http://h/", headers={"X": "a\r\nEvil: 1"}), "the value of header 'X'"),
        (ServerConfig("stdio", command="x", env={"K": "a\x00"}), "environment variable 'K' must not contain NUL"),
    ]:
        with pytest.raises(UsageError, match=said):
            config.refuse_control_characters()
    ServerConfig("stdio", command="x", env={"PEM": "line 1\nline 2"}).refuse_control_characters()  # a key file
    with pytest.raises(ConnectorError, match="lacks the value of K"):
        ServerConfig.from_stored({"transport": "stdio", "command": "x", "env_keys": ["K"]}, {})


def test_secrets_file_modes_and_round_trip(tmp_path):
    d = tmp_path / "secrets"
    path = write_secrets(d, "mcp-a", {"env": {"K": "v-secret"}, "headers": {}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(d.stat().st_mode) == 0o700
    assert read_secrets(d, "mcp-a") == {"env": {"K": "v-secret"}, "headers": {}}
    assert read_secrets(d, "mcp-none") == {}
    assert [p.name for p in d.iterdir()] == ["mcp-a.json"]  # no temporary file left behind


def test_redact():
    assert redact("key abcd1234 and abc and abcd1234x", ["abcd1234", "abc", ""]) == "key *** and abc and ***x"


def test_raw_listing_keeps_annotations_as_sent():
    s = spec_from_raw({"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "true"}})
    assert (s.annotations, s.description, s.untrusted_output) == ({"readOnlyHint": "true"}, "", True)
    assert prefill_class(s.annotations) is ToolClass.DESTRUCTIVE  # the string counts as absent
    assert spec_from_raw({"name": "t", "annotations": None}).annotations is None
    fs_read = spec_from_raw({"name": "read", "annotations": {"readOnlyHint": True, "openWorldHint": False}})
    assert prefill_class(fs_read.annotations) is ToolClass.READ  # destructiveHint absent, not false


def test_render_result_blocks():
    r = types.CallToolResult(content=[
        types.TextContent(type="text", text="hello"),
        types.ImageContent(type="image", data="aGk=", mime_type="image/png"),
        types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///a", text="body")),
        types.ResourceLink(type="resource_link", name="doc", uri="file:///doc"),
    ])
    assert render_result(r) == ("hello\n[image content (image/png), 4 base64 characters, not shown]\n"
                                "[resource <file:///a>]\nbody\n[resource link doc <file:///doc>]")
    assert render_result(types.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'


def test_cap_text():
    assert cap_text("short", 100) == "short"
    capped = cap_text("é" * 1000, 200)  # 2000 bytes; the cut must not split a character
    assert len(capped.encode()) <= 200
    assert capped.endswith("[output truncated by Palui: the result was 2000 bytes, the limit is 200 bytes]")
    assert capped.startswith("é")


def test_backoff():
    assert [backoff_seconds(n) for n in range(0, 10)] == [0, 0, 1, 2, 4, 8, 16, 32, 60, 60]


@pytest.mark.slow
def test_stderr_flood_is_drained_and_capped(tmp_path):
    cap = StderrCapture(tmp_path / "logs" / "mcp-x.stderr.log", cap_bytes=64 * 1024)
    errlog = cap.open()
    script = "import os\nfor _ in range(400): os.write(2, b'z' * 8191 + b'\\n')\nprint('done')"
    out = subprocess.run([sys.executable, "-c", script], stderr=errlog, capture_output=False,
                         stdout=subprocess.PIPE, timeout=300, text=True)
    cap.spawned()
    assert out.stdout.strip() == "done"  # 3.2 MB never blocked the child (a blocked one never prints it)
    assert cap.exited.wait(5)
    files = list((tmp_path / "logs").iterdir())
    assert sum(p.stat().st_size for p in files) <= 64 * 1024
    assert {p.name for p in files} == {"mcp-x.stderr.log", "mcp-x.stderr.log.1"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in files)
    assert cap.tail().endswith("z" * 300)
