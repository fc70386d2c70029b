"""Signing in again (spec §7.9), from the command line, against authorization servers that compare the
redirect URI exactly: the ``mcp`` SDK's own (``support/sdk_oauth.py``) and a client the person
registered with a fixed redirect URI (``support/oauth_server.py``).

Shown: ``connectors login`` after a logout (revocation), adding again after ``remove``, and a second
connector of the same server all sign in (each CLI run used to listen on a new random port while
reusing the registration made for the old one: "Redirect URI … not registered"); when the port of
last time is taken, Palui listens elsewhere and registers again; a client with a fixed redirect URI
says so when its port is taken.
"""

from __future__ import annotations

import json
import socket

import pytest

from support.oauth_server import AuthServerOptions, OAuthTestServer, PreRegisteredClient
from support.sdk_oauth import SDKOAuthServer
from support.signin_cli import sign_in, signed_in

pytestmark = pytest.mark.slow


def test_sign_in_again_against_the_sdks_exact_redirect_matching(cli_process, home):
    # Each command in a child, as the person runs them: in the suite's in-process runner the logout inside the
    # squatter block found the test process's database connection reading a closed-and-reused descriptor
    # (being investigated; a child per command is what a person's commands are).
    cli = cli_process
    with SDKOAuthServer() as srv:
        signed_in(*sign_in(home, "connectors", "add", "remote", "--url", srv.mcp_url))
        assert srv.provider.count("register") == 1
        r = cli("connectors", "logout", "mcp-remote")
        assert r.returncode == 0 and "revocation: revoked" in r.stdout, r.stderr
        # After a revocation: sign in again.
        signed_in(*sign_in(home, "connectors", "login", "mcp-remote"))
        assert "mcp-remote: signed in and connected" in sign_in(home, "connectors", "login", "mcp-remote")[0].stdout
        # Removed, then added again; and a second connector of the same server.
        assert cli("connectors", "remove", "mcp-remote").returncode == 0
        signed_in(*sign_in(home, "connectors", "add", "remote", "--url", srv.mcp_url))
        signed_in(*sign_in(home, "connectors", "add", "second", "--url", srv.mcp_url))
        assert srv.provider.count("token") == 4
        # The same loopback redirect URI each time: the one registration serves them all.
        assert srv.provider.count("register") == 1
        # When the port of last time is taken, Palui listens on another one and registers again for it.
        port = json.loads((home / "secrets" / "oauth" / "loopback" / "mcp-second.json").read_text())["port"]
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen(1)
            assert cli("connectors", "logout", "mcp-second").returncode == 0
            r, answer = sign_in(home, "connectors", "login", "mcp-second")
            signed_in(r, answer)
            assert f"127.0.0.1:{port}/" not in answer.headers["location"]  # type: ignore[union-attr]
        assert srv.provider.count("register") == 2
        shown = cli("connectors", "show", "mcp-second", "--json")
        assert '"signed_in": true' in shown.stdout


def test_a_client_with_a_fixed_redirect_uri_says_when_its_port_is_taken(cli, home, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fixed = f"http://127.0.0.1:{port}/callback"
    pre = PreRegisteredClient("palui-fixed", None, "none", redirect_uris=(fixed,))
    with OAuthTestServer(AuthServerOptions(dynamic_registration=False, pre_registered=(pre,))) as srv:
        r, answer = sign_in(home, "connectors", "add", "remote", "--url", srv.mcp_url(0), "--client-id", "palui-fixed",
                            "--redirect-uri", fixed)
        signed_in(r, answer)
        assert answer is not None and answer.headers["location"].startswith(fixed + "?")
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen(1)
            assert cli("connectors", "logout", "mcp-remote").returncode == 0
            r, answer = sign_in(home, "connectors", "login", "mcp-remote")
        assert answer is None and r.returncode == 1
        assert f"the redirect URI {fixed} that this client fixes needs port {port}" in r.stderr
        assert srv.auth.count("authorize") == 1


def test_a_client_metadata_documents_redirect_uri_is_the_one_listened_on(tmp_path):
    """With ``mcp.oauth.client_metadata_url`` the authorization server checks the redirect URI against the
    document: the listener takes the document's loopback redirect URI, and says so when its port is taken."""
    import asyncio
    import http.server
    import threading

    from palui.connectors.mcp.oauth import OAuthFiles, SignInRequired
    from palui.connectors.mcp.oauth.signin import loopback_sign_in
    from palui.types import SignIn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    fixed = f"http://127.0.0.1:{port}/cb"
    document = json.dumps({"client_id": "x", "redirect_uris": ["https://app.example/cb", fixed]}).encode()

    class Document(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Document)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/client.json"
    files = OAuthFiles(tmp_path)

    async def listen() -> str:
        async with loopback_sign_in(files, "mcp-x", SignIn(show=lambda u: None), url) as handler:
            return handler.redirect_uri

    try:
        assert asyncio.run(listen()) == fixed
        assert files.loopback_port("mcp-x") == 0  # the document's port is not remembered as the connector's
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen(1)
            with pytest.raises(SignInRequired, match=f"the redirect URI {fixed} that this client fixes needs port"):
                asyncio.run(listen())
    finally:
        server.shutdown()
