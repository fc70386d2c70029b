"""Start errors that tell the person why.

- An HTTP MCP server that answers the handshake with 401/403: the error says so (the SDK
  reports only "Server returned an error response"). A 401 to a connector made for a turn
  (nobody can sign in) is ``error: sign in again`` at once, with the server's challenge and
  how to sign in, before any OAuth discovery request. A 403 quotes the server's reason and
  mentions credentials only when some were sent, never a secret value.
- A stdio server that exits during the handshake: its last stderr lines are in the error
  even when the thread draining them into the log runs late (a busy machine).
"""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from palui.connectors.mcp import MCPConnector
from palui.connectors.mcp import stderr as stderr_module
from palui.connectors.mcp.config import ServerConfig
from palui.errors import ConnectorError

SECRET = "sekrit-token-9876"
CHALLENGE = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"'


@pytest.fixture
def refusing_server():
    """An HTTP endpoint refusing every POST: 403 when an Authorization header came, else 401."""
    seen: list[str | None] = []
    gets: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization"))
            status = 403 if self.headers.get("Authorization") else 401
            body = b'{"error": "unauthorized", "error_description": "token \\u202e revoked"}'
            self.send_response(status)
            if status == 401:
                self.send_header("WWW-Authenticate", CHALLENGE)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            gets.append(self.path)
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen, gets
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
async def test_401_in_a_turn_is_sign_in_again_at_once(svc, refusing_server):
    url, seen, gets = refusing_server
    with svc.db.write() as c:
        c.execute("INSERT INTO connectors (id, kind, name, transport, created_at) VALUES ('mcp-locked', 'mcp',"
                  " 'locked', 'http', 0)")
    conn = MCPConnector(svc._hub.env, "mcp-locked", "locked", ServerConfig("http", url=url, timeout_seconds=10))
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    text = str(e.value)
    assert "needs you to sign in again: palui connectors login mcp-locked" in text, text
    assert "refused the MCP handshake: HTTP 401 Unauthorized: the server wants authorization" in text
    assert f"WWW-Authenticate: {CHALLENGE}" in text
    assert conn.state() == "error: sign in again"
    assert seen == [None] and gets == []  # no discovery, no registration: nobody could finish a sign-in
    [notice] = [r["text"] for r in svc.notifier.inbox() if "sign in again" in r["text"]]
    assert "palui connectors login mcp-locked" in notice
    # Until someone signs in, the connector refuses at once without asking the server again.
    again = MCPConnector(svc._hub.env, "mcp-locked", "locked", ServerConfig("http", url=url, timeout_seconds=10))
    with pytest.raises(ConnectorError, match="sign in again"):
        await again.start()
    await again.close()
    assert seen == [None]
    assert len([r for r in svc.notifier.inbox() if "sign in again" in r["text"]]) == 1  # told once


@pytest.mark.slow
async def test_403_names_the_credentials_and_never_the_secret(svc, refusing_server):
    url, seen, _gets = refusing_server
    conn = MCPConnector(svc._hub.env, "mcp-locked", "locked",
                        ServerConfig("http", url=url, headers={"Authorization": "Bearer " + SECRET},
                                     timeout_seconds=10))
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    text = str(e.value)
    assert ("HTTP 403 Forbidden: the server says “token \\u202e revoked (contains hidden characters)”; it does not"
            " accept the credentials sent") in text, text
    assert SECRET not in text and SECRET not in conn.state()
    assert seen and seen[0] == "Bearer " + SECRET


@pytest.mark.slow
async def test_exit_during_handshake_waits_for_a_late_stderr_drain(svc, monkeypatch):
    drain = stderr_module.StderrCapture._drain

    def late_drain(self, read_fd, stamp):
        time.sleep(0.2)  # the drain thread is scheduled late, after the SDK saw the exit
        drain(self, read_fd, stamp)

    monkeypatch.setattr(stderr_module.StderrCapture, "_drain", late_drain)
    script = "import sys; print('cannot open the database', file=sys.stderr); sys.exit(3)"
    config = ServerConfig("stdio", command=sys.executable, args=("-c", script), timeout_seconds=10)
    conn = MCPConnector(svc._hub.env, "mcp-dies", "dies", config)
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    assert "exited (or closed the connection) during the MCP handshake" in str(e.value)
    assert "Last lines of its stderr:\ncannot open the database" in str(e.value), str(e.value)


@pytest.fixture
def localhost_only_server():
    """Like @playwright/mcp: 403 with a plain-text reason to a request that carried no credentials."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = ("Access is only allowed at localhost:8931 " + "x" * 400).encode()
            self.send_response(403)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
async def test_403_without_credentials_shows_the_servers_reason_capped(svc, localhost_only_server):
    config = ServerConfig("http", url=localhost_only_server, timeout_seconds=10)
    conn = MCPConnector(svc._hub.env, "mcp-pw", "pw", config)
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    text = str(e.value)
    assert "HTTP 403 Forbidden: the server says “Access is only allowed at localhost:8931 xxx" in text, text
    assert "credentials" not in text and "OAuth" not in text
    assert "x" * 200 not in text and "…”" in text  # capped
