"""Start errors that tell the person why.

- An HTTP MCP server that answers the handshake with 401/403: the error says so (the SDK
  reports only "Server returned an error response"), with the server's challenge, the way
  to give a token, and no secret header value. Palui does no OAuth (docs/mcp-conformance.md).
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

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Authorization"))
            status = 403 if self.headers.get("Authorization") else 401
            body = b'{"error": "unauthorized"}'
            self.send_response(status)
            if status == 401:
                self.send_header("WWW-Authenticate", CHALLENGE)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_401_says_authorization_is_wanted(svc, refusing_server):
    url, seen = refusing_server
    conn = MCPConnector(svc.hub.env, "mcp-locked", "locked", ServerConfig("http", url=url, timeout_seconds=10))
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    text = str(e.value)
    assert "refused the MCP handshake: HTTP 401 Unauthorized" in text, text
    assert f"WWW-Authenticate: {CHALLENGE}" in text and "--header 'Authorization=Bearer" in text
    assert conn.state().startswith("error: the server refused the MCP handshake: HTTP 401"), conn.state()
    assert seen and seen[0] is None


async def test_403_names_the_credentials_and_never_the_secret(svc, refusing_server):
    url, seen = refusing_server
    conn = MCPConnector(svc.hub.env, "mcp-locked", "locked",
                        ServerConfig("http", url=url, headers={"Authorization": "Bearer " + SECRET}, timeout_seconds=10))
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    text = str(e.value)
    assert "HTTP 403 Forbidden: the server does not accept the credentials sent" in text, text
    assert SECRET not in text and SECRET not in conn.state()
    assert seen and seen[0] == "Bearer " + SECRET


async def test_exit_during_handshake_waits_for_a_late_stderr_drain(svc, monkeypatch):
    drain = stderr_module.StderrCapture._drain

    def late_drain(self, read_fd, stamp):
        time.sleep(0.2)  # the drain thread is scheduled late, after the SDK saw the exit
        drain(self, read_fd, stamp)

    monkeypatch.setattr(stderr_module.StderrCapture, "_drain", late_drain)
    script = "import sys; print('cannot open the database', file=sys.stderr); sys.exit(3)"
    conn = MCPConnector(svc.hub.env, "mcp-dies", "dies", ServerConfig("stdio", command=sys.executable, args=("-c", script),
                                                              timeout_seconds=10))
    with pytest.raises(ConnectorError) as e:
        await conn.start()
    await conn.close()
    assert "exited (or closed the connection) during the MCP handshake" in str(e.value)
    assert "Last lines of its stderr:\ncannot open the database" in str(e.value), str(e.value)
